//! Exporters: envcraft environments as other projects' tasks. [`harbor`]: each task a Harbor
//! task directory that runs on any Harbor provider (a self-contained checker, a `solve.sh`).

pub mod harbor;

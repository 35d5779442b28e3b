//! The file formats of envcraft, parsed and validated. Each format rejects unknown keys and
//! reports errors with the key, the line and what was expected.

pub mod policy;

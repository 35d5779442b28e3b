//! Images: a task's own root filesystem, from OCI images, without Docker.
//!
//! - [`oci`]: digests and the OCI and Docker documents (index, manifest, config,
//!   docker-archive's `manifest.json`), platform selection;
//! - [`layer`]: the rules that unpack one untrusted layer (paths, links, devices, bounds,
//!   whiteouts), run only inside the unpacking sandbox of [`unpack`];
//! - [`unpack`]: that sandbox: a child in its own user namespace under Landlock limited to the
//!   layer's directory;
//! - [`store`]: the content-addressed layer store under the state root, image records, `gc`;
//! - [`import`]: OCI layouts and docker-archives, as directories or tar files.

pub mod import;
pub mod layer;
pub mod oci;
pub mod store;
pub mod unpack;

pub use import::{ImportError, Imported, import, import_rootfs};
pub use layer::{LayerError, Limits};
pub use oci::Digest;
pub use store::{GcReport, ImageRecord, Store, StoreError};

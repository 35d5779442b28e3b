//! Images: a task's own root filesystem, from OCI images, without Docker.
//!
//! - [`oci`]: digests and the OCI and Docker documents (index, manifest, config,
//!   docker-archive's `manifest.json`), platform selection;
//! - [`layer`]: the rules that unpack one untrusted layer (paths, links, devices, bounds,
//!   whiteouts), run only inside the unpacking sandbox of [`unpack`];
//! - [`blob`]: a layer's blob read and hashed on a thread of its own, beside the unpacking;
//! - [`unpack`]: that sandbox: a child in its own user namespace under Landlock limited to the
//!   layer's directory;
//! - [`store`]: the content-addressed layer store under the state root, image records, `gc`;
//! - [`import`]: OCI layouts and docker-archives, as directories or tar files;
//! - [`credentials`]: registry credentials from a flag or the Docker/Podman auth files;
//! - [`registry`]: one OCI distribution registry (through the `oci-client` crate): auth,
//!   manifests and blobs, each checked against its digest, blobs resumable;
//! - [`pull`]: `image pull`: a registry's image into the store, unpacked as imports are;
//! - [`build`]: `image build`: a Dockerfile built by Podman or Buildah, its result imported;
//! - [`handover`]: the store's `FROM` images the builder lacks, given to it for a build;
//! - [`leftovers`]: what killed builds leave (the builder's image, a scratch directory), for `gc`;
//! - [`tree`]: the files an image's stacked layers have below a directory;
//! - [`lookup`]: an image by the name a user gives, a pinned reference pulled on first use.

mod blob;
pub mod build;
pub mod credentials;
mod handover;
pub mod import;
pub mod layer;
pub mod leftovers;
pub mod lookup;
pub mod oci;
pub mod pull;
pub mod registry;
pub mod store;
pub mod tree;
pub mod unpack;

pub use build::{BuildError, BuildOptions, Builder, Built, Isolation, build};
pub use credentials::{Credentials, CredentialsError};
pub use import::{ImportError, Imported, import, import_rootfs};
pub use layer::{LayerError, Limits};
pub use oci::Digest;
pub use pull::{PullError, PullOptions, Pulled, pull};
pub use registry::{Connection, RegistryError};
pub use store::{GcReport, ImageRecord, Store, StoreError};

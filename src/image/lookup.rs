//! Finding an image by the name a user gives (`exec --image`, `env.toml`'s `image`): a record
//! of the store, else a registry reference pinned by digest (`REF@sha256:...`), pulled on first
//! use under a lock of that name (two first uses pull it once). A registry reference by tag
//! alone is refused: what it names can change, and a task's root must not.

use super::credentials;
use super::pull::{PullError, PullOptions, Pulled, pull};
use super::registry::parse_reference;
use super::store::{ImageRecord, Store, StoreError};

/// Whether `name` reads as a reference to a registry (its first component is a host: it has
/// a dot or a port, or is `localhost`), as Docker tells `host/repo` from `user/repo`.
pub fn is_registry_reference(name: &str) -> bool {
    match name.split_once('/') {
        Some((first, _)) => first.contains('.') || first.contains(':') || first == "localhost",
        None => false,
    }
}

impl Store {
    /// The image named `name`: its record, or, for a reference pinned by digest that the store
    /// does not hold yet, the image pulled now (credentials from the usual auth files).
    pub fn image(&self, name: &str) -> Result<ImageRecord, StoreError> {
        match self.record(name) {
            Err(StoreError::NoImage { .. }) => {}
            found => return found,
        }
        let pinned = name.contains("@sha256:") && parse_reference(name).is_ok();
        if !pinned {
            return Err(if is_registry_reference(name) {
                StoreError::NotPinned {
                    name: name.to_string(),
                }
            } else {
                StoreError::NoImage {
                    name: name.to_string(),
                }
            });
        }
        let _first_use = self.name_lock(name)?;
        match self.record(name) {
            Err(StoreError::NoImage { .. }) => {}
            found => return found,
        }
        self.pull_by_reference(name).map(|p| p.record)
    }

    /// Pull `reference` (a tag or a digest) into the store under that name, with the
    /// credentials of the usual auth files.
    pub fn pull_by_reference(&self, reference: &str) -> Result<Pulled, StoreError> {
        let failed = |e: PullError| StoreError::Pull {
            name: reference.to_string(),
            source: Box::new(e),
        };
        let parsed = parse_reference(reference).map_err(|e| failed(e.into()))?;
        let files = credentials::auth_files(None);
        let creds = credentials::lookup(&files, false, parsed.registry(), parsed.repository())
            .map_err(|e| failed(e.into()))?;
        tracing::info!(image = reference, "pulling the image on first use");
        pull(self, reference, &PullOptions::new(creds)).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_reference_starts_with_a_host_as_docker_tells_them() {
        for r in ["127.0.0.1:5000/app:1", "localhost/app", "ghcr.io/o/app:v1"] {
            assert!(is_registry_reference(r), "{r}");
        }
        for r in [
            "office",
            "debian:bookworm",
            "library/debian",
            "my-team/app:1",
        ] {
            assert!(!is_registry_reference(r), "{r}");
        }
    }
}

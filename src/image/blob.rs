//! A layer's blob, hashed on a thread of its own while the unpacker consumes it: SHA-256 of a
//! layer costs about as much as writing its files (0.12 s and 0.11 s of CPU for 200 MB here),
//! so the two overlap on two cores instead of adding up.
//!
//! The consumer's thread reads the blob into chunks and hands each, shared and never written
//! again, to the hashing thread; a chunk's buffer is reused only once both are done with it.
//! Promises: the digest is of exactly the bytes handed to the consumer, in their order (one
//! copy of them, read once: the blob is never mapped, so a file changed under the import cannot
//! show the two threads different bytes); the count of bytes read is updated as each chunk is
//! read (for the expansion-ratio bound); at most [`CHUNKS`] chunks are read ahead of the hash.
//!
//! Runs in the unpacking sandbox's child, after its confinement: the thread inherits the
//! Landlock domain. The child is a clone of one thread of envcraft
//! ([`crate::sys::clone_process`]), so a C-library lock that another of envcraft's threads held
//! at the clone stays held in it; making a thread takes glibc's stack-cache lock, which a
//! thread being made or ending holds. A clone of a multi-threaded envcraft (a pull, the
//! server) therefore hashes on its one thread ([`Hashing::Inline`]): slower, never stuck.

use std::cell::Cell;
use std::io::{self, BufRead, Read};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use sha2::{Digest as _, Sha256};

/// The size of a chunk (a few fit in the CPU's caches together).
const CHUNK: usize = 256 << 10;
/// The most chunks in use at once (read and not yet hashed, or being consumed).
const CHUNKS: usize = 8;

/// A chunk: its buffer (always [`CHUNK`] long) and how much of it the blob filled.
type Chunk = (Arc<Vec<u8>>, usize);

/// Where the chunks are hashed.
pub enum Hashing {
    /// On a thread of its own, beside the consumer.
    Thread,
    /// On the consumer's thread, as each chunk is read.
    Inline,
}

/// What hashes the chunks: the thread (fed and giving buffers back through channels), or the
/// consumer's own hasher.
enum Hasher {
    Thread {
        /// None once the end was read: the thread finishes what it has and stops.
        to_hash: Option<Sender<Chunk>>,
        hashed: Receiver<Arc<Vec<u8>>>,
        /// Buffers made (at most [`CHUNKS`]).
        made: usize,
    },
    Inline {
        hasher: Sha256,
        bytes: u64,
        ended: bool,
    },
}

/// The consumer's side: the blob's bytes, read by chunk, each hashed before it is consumed or
/// beside it.
pub struct Chunks<R> {
    input: R,
    hasher: Hasher,
    current: Arc<Vec<u8>>,
    start: usize,
    end: usize,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Chunks<R> {
    /// A buffer of no other holder: one the hashing thread is done with (or ours, inline), or
    /// a new one; None once the end was read.
    fn buffer(&mut self) -> io::Result<Option<Vec<u8>>> {
        let ours = std::mem::take(&mut self.current);
        match &mut self.hasher {
            Hasher::Inline { ended: true, .. } | Hasher::Thread { to_hash: None, .. } => Ok(None),
            Hasher::Inline { .. } => Ok(Some(
                Arc::try_unwrap(ours)
                    .ok()
                    .filter(|b| b.len() == CHUNK)
                    .unwrap_or_else(|| vec![0; CHUNK]),
            )),
            Hasher::Thread { hashed, made, .. } => {
                // Ours dropped first, so that the buffer the thread gives back has no other
                // holder (it is often this one: the thread hashes faster than files are written).
                drop(ours);
                loop {
                    let back = if *made < CHUNKS {
                        hashed.try_recv().ok()
                    } else {
                        Some(hashed.recv().map_err(|_| gone())?)
                    };
                    match back.map(Arc::try_unwrap) {
                        Some(Ok(buf)) => return Ok(Some(buf)),
                        Some(Err(_)) => *made -= 1, // still held elsewhere: let it go
                        None => {
                            *made += 1;
                            return Ok(Some(vec![0; CHUNK]));
                        }
                    }
                }
            }
        }
    }

    /// Read the next chunk (to its end, or to the blob's) and hash it or send it to be hashed.
    fn next_chunk(&mut self) -> io::Result<()> {
        (self.start, self.end) = (0, 0);
        let Some(mut buf) = self.buffer()? else {
            return Ok(()); // the end was read
        };
        let mut len = 0;
        while len < CHUNK {
            match self.input.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.read.set(self.read.get() + len as u64);
        let chunk = Arc::new(buf);
        match &mut self.hasher {
            Hasher::Inline {
                hasher,
                bytes,
                ended,
            } => {
                hasher.update(&chunk[..len]);
                *bytes += len as u64;
                *ended = len < CHUNK;
            }
            Hasher::Thread { to_hash, .. } => {
                if len > 0
                    && let Some(sender) = to_hash
                {
                    sender.send((chunk.clone(), len)).map_err(|_| gone())?;
                }
                if len < CHUNK {
                    *to_hash = None;
                }
            }
        }
        (self.current, self.end) = (chunk, len);
        Ok(())
    }
}

fn gone() -> io::Error {
    io::Error::other("the hashing thread stopped")
}

impl<R: Read> Read for Chunks<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Chunks<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.start == self.end {
            self.next_chunk()?;
        }
        Ok(&self.current[self.start..self.end])
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }
}

/// Hand `input` to `consume` as a [`BufRead`], hashed as `hashing` says as it is read, counted
/// into `read`. Returns what `consume` returned, the hasher and the bytes read (the blob's
/// digest and size once `consume` has read to the end), or the error of starting the thread.
pub fn read_hashed<R: Read, T>(
    input: R,
    read: Rc<Cell<u64>>,
    hashing: Hashing,
    consume: impl FnOnce(&mut Chunks<R>) -> T,
) -> io::Result<(T, Sha256, u64)> {
    let chunks = |hasher| Chunks {
        input,
        hasher,
        current: Arc::default(),
        start: 0,
        end: 0,
        read,
    };
    if let Hashing::Inline = hashing {
        let mut chunks = chunks(Hasher::Inline {
            hasher: Sha256::new(),
            bytes: 0,
            ended: false,
        });
        let out = consume(&mut chunks);
        return match chunks.hasher {
            Hasher::Inline { hasher, bytes, .. } => Ok((out, hasher, bytes)),
            Hasher::Thread { .. } => Err(gone()), // made inline above
        };
    }
    std::thread::scope(|scope| {
        let (to_hash, received) = channel::<Chunk>();
        let (back, hashed) = channel();
        let hashing = std::thread::Builder::new()
            .name("layer-digest".into())
            .spawn_scoped(scope, move || {
                let mut hasher = Sha256::new();
                let mut bytes = 0u64;
                for (chunk, len) in received {
                    hasher.update(&chunk[..len]);
                    bytes += len as u64;
                    let _ = back.send(chunk);
                }
                (hasher, bytes)
            })?;
        let mut chunks = chunks(Hasher::Thread {
            to_hash: Some(to_hash),
            hashed,
            made: 0,
        });
        let out = consume(&mut chunks);
        // The sender dropped: the thread hashes what it was sent, then stops.
        drop(chunks);
        let (hasher, bytes) = hashing
            .join()
            .map_err(|_| io::Error::other("the hashing thread panicked"))?;
        Ok((out, hasher, bytes))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn both() -> [Hashing; 2] {
        [Hashing::Thread, Hashing::Inline]
    }

    #[test]
    fn the_digest_and_count_are_of_the_bytes_handed_over_across_chunks() {
        for (len, hashing) in [0, 1, CHUNK, 3 * CHUNK + 17, (CHUNKS + 3) * CHUNK]
            .into_iter()
            .flat_map(|len| both().map(|h| (len, h)))
        {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let read = Rc::new(Cell::new(0));
            let (out, hasher, bytes) = read_hashed(&data[..], read.clone(), hashing, |c| {
                let mut all = Vec::new();
                c.read_to_end(&mut all).unwrap();
                all
            })
            .unwrap();
            assert_eq!(out, data);
            assert_eq!(bytes, data.len() as u64);
            assert_eq!(read.get(), data.len() as u64);
            assert_eq!(hasher.finalize()[..], Sha256::digest(&data)[..]);
        }
    }

    #[test]
    fn a_consumer_that_stops_early_reads_no_further() {
        for hashing in both() {
            let (first, _, bytes) = read_hashed(io::repeat(1), Rc::default(), hashing, |c| {
                c.fill_buf().unwrap().len()
            })
            .unwrap();
            assert_eq!(first, CHUNK);
            assert_eq!(bytes, CHUNK as u64);
        }
    }

    #[test]
    fn a_read_error_reaches_the_consumer() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("gone"))
            }
        }
        for hashing in both() {
            let (got, _, _) =
                read_hashed(Failing, Rc::default(), hashing, |c| c.fill_buf().is_err()).unwrap();
            assert!(got);
        }
    }
}

//! A layer's blob, read by chunk and hashed beside its consumer: SHA-256 of a layer costs
//! about as much as writing its files (0.12 s and 0.11 s of CPU for 200 MB here), so the two
//! overlap on two cores instead of adding up.
//!
//! A blob in a regular file (an import's layout, archive or root filesystem tar) is read by
//! chunk at the chunks' offsets, by two threads: the hashing thread reads the even chunks, the
//! consumer's thread the odd ones, and each hands the chunks it read, shared and never written
//! again, to the other; the hashing thread hashes every chunk in order, the consumer consumes
//! every chunk in order. Reading (a copy out of the page cache, about a sixth of the work) is
//! thus split between the two, so neither thread carries it all; each reads its chunks ahead
//! while it has buffers free, so that one thread's pause (a file being created, the other
//! process the core was lent to) does not stop the other at once. A blob that is a stream (a
//! pipe, bytes in memory), or one whose unpacker may not make a thread, is read by the
//! consumer in order and hashed on its thread ([`Hashing::Inline`]).
//!
//! Promises: the digest is of exactly the bytes handed to the consumer, in their order (one
//! copy of each chunk, read once by one thread: the blob is never mapped, so a file changed
//! under the import cannot show the two threads different bytes); the blob ends at its first
//! short chunk (what a growing file shows past it is neither hashed nor consumed); the count of
//! bytes read is updated as each chunk reaches the consumer (for the expansion-ratio bound); a
//! chunk's buffer is reused only once both threads are done with it, and each thread makes at
//! most [`POOL`] of them (so neither reads further ahead than that).
//!
//! Runs in the unpacking sandbox's child, after its confinement: the thread inherits the
//! Landlock domain. The child is a clone of one thread of envcraft
//! ([`crate::sys::clone_process`]), so a C-library lock that another of envcraft's threads held
//! at the clone stays held in it; making a thread takes glibc's stack-cache lock, which a
//! thread being made or ending holds. A clone of a multi-threaded envcraft (a pull, the
//! server) therefore hashes on its one thread ([`Hashing::Inline`]): slower, never stuck.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use sha2::{Digest as _, Sha256};

/// The size of a chunk (a few fit in the CPU's caches together).
const CHUNK: usize = 256 << 10;
/// The most buffers each thread makes: how far it may read ahead of the other's use.
const POOL: usize = 6;

/// A chunk: its buffer (always [`CHUNK`] long) and how much of it the blob filled.
type Chunk = (Arc<Vec<u8>>, usize);

/// Where the chunks are hashed.
pub enum Hashing {
    /// On a thread of its own, beside the consumer (for a blob in a regular file; a stream is
    /// hashed inline).
    Thread,
    /// On the consumer's thread, as each chunk is read.
    Inline,
}

/// Where a blob's bytes are.
pub enum Source<R> {
    /// A regular file, from `offset`, `len` bytes (to its end when None): read by chunk at the
    /// chunks' offsets.
    File {
        file: File,
        offset: u64,
        len: Option<u64>,
    },
    /// A stream, read in order.
    Stream(R),
}

/// A blob in a file, read by chunk index.
#[derive(Clone, Copy)]
struct At<'f> {
    file: &'f File,
    offset: u64,
    len: Option<u64>,
}

impl At<'_> {
    /// Read chunk `index` into `buf` (to the chunk's end, or to the blob's): the bytes read.
    fn fill(&self, index: u64, buf: &mut [u8]) -> io::Result<usize> {
        let start = index * CHUNK as u64;
        let want = match self.len {
            Some(len) => len.saturating_sub(start).min(CHUNK as u64) as usize,
            None => CHUNK,
        };
        let mut got = 0;
        while got < want {
            match self
                .file
                .read_at(&mut buf[got..want], self.offset + start + got as u64)
            {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}

/// Read from `input` into `buf` until it is full or the stream ends: the bytes read.
fn fill_stream(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// One thread's buffers: those the other thread gave back, and how many were made.
struct Pool {
    back: Receiver<Arc<Vec<u8>>>,
    held: Vec<Arc<Vec<u8>>>,
    made: usize,
}

impl Pool {
    fn new(back: Receiver<Arc<Vec<u8>>>) -> Pool {
        Pool {
            back,
            held: Vec::new(),
            made: 0,
        }
    }

    /// A buffer no one else holds, without waiting: one given back (and dropped by this
    /// thread too), or a new one while fewer than [`POOL`] were made.
    fn try_take(&mut self) -> Option<Vec<u8>> {
        self.held.extend(self.back.try_iter());
        // A buffer given back is held by the other thread no more (it sent its only share);
        // by this one, only while it is still this thread's current chunk.
        if let Some(i) = self.held.iter().position(|b| Arc::strong_count(b) == 1)
            && let Ok(buf) = Arc::try_unwrap(self.held.swap_remove(i))
        {
            return Some(buf);
        }
        (self.made < POOL).then(|| {
            self.made += 1;
            vec![0; CHUNK]
        })
    }

    /// A buffer no one else holds, waiting for one to come back when all are in use.
    fn take(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(buf) = self.try_take() {
                return Ok(buf);
            }
            let buf = self.back.recv().map_err(|_| gone())?;
            self.held.push(buf);
        }
    }
}

/// One thread's share of a split read: the chunks of its parity (even for the hashing thread,
/// odd for the consumer), read in order, ahead of their use while buffers are free, each sent
/// to the other thread as it is read.
struct Share<'f> {
    at: At<'f>,
    /// The index of the next chunk of this share to read.
    next: u64,
    /// A chunk of this share was short (or failed): none is read past it.
    ended: bool,
    /// Read and sent, not yet used here, in order.
    ready: VecDeque<io::Result<Chunk>>,
    pool: Pool,
    to_other: Sender<io::Result<Chunk>>,
}

impl<'f> Share<'f> {
    fn new(at: At<'f>, first: u64, pool: Pool, to_other: Sender<io::Result<Chunk>>) -> Share<'f> {
        Share {
            at,
            next: first,
            ended: false,
            ready: VecDeque::new(),
            pool,
            to_other,
        }
    }

    /// Read ahead while a buffer is free (the other thread, waiting for one of these chunks,
    /// is never kept waiting by this one's own work).
    fn read_ahead(&mut self) {
        while !self.ended
            && let Some(buf) = self.pool.try_take()
        {
            self.read_into(buf);
        }
    }

    fn read_into(&mut self, mut buf: Vec<u8>) {
        let index = self.next;
        self.next += 2;
        let chunk = self
            .at
            .fill(index, &mut buf)
            .map(|len| (Arc::new(buf), len));
        let copy = match &chunk {
            Ok((shared, len)) => Ok((shared.clone(), *len)),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        self.ended = !matches!(chunk, Ok((_, len)) if len == CHUNK);
        let _ = self.to_other.send(copy);
        self.ready.push_back(chunk);
    }

    /// The next chunk of this share, read now (waiting for a buffer) if it was not read ahead.
    fn next_chunk(&mut self) -> io::Result<Chunk> {
        if self.ready.is_empty() && !self.ended {
            let buf = self.pool.take()?;
            self.read_into(buf);
        }
        // Past an end this share read, no chunk of it is asked for: both threads stop at the
        // blob's first short chunk.
        self.ready.pop_front().unwrap_or_else(|| Err(gone()))
    }
}

/// How the consumer's chunks come.
enum Feed<'f, R> {
    /// Read here, hashed here.
    Inline {
        source: Source<R>,
        hasher: Sha256,
        bytes: u64,
    },
    /// Odd chunks read here (and sent to be hashed), even ones from the hashing thread.
    Split {
        odds: Share<'f>,
        evens: Receiver<io::Result<Chunk>>,
        /// Even chunks given back to the hashing thread once consumed.
        evens_back: Sender<Arc<Vec<u8>>>,
    },
}

/// The consumer's side: the blob's bytes, read by chunk, each hashed before it is consumed or
/// beside it.
pub struct Chunks<'f, R> {
    feed: Feed<'f, R>,
    current: Arc<Vec<u8>>,
    start: usize,
    end: usize,
    /// The index of the next chunk.
    next: u64,
    /// A short chunk was handed over: the blob ended.
    ended: bool,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Chunks<'_, R> {
    /// Make the next chunk current (an empty one past the end).
    fn next_chunk(&mut self) -> io::Result<()> {
        (self.start, self.end) = (0, 0);
        let done = std::mem::take(&mut self.current);
        if self.ended {
            return Ok(());
        }
        let index = self.next;
        let (chunk, len) = match &mut self.feed {
            Feed::Inline {
                source,
                hasher,
                bytes,
            } => {
                let mut buf = Arc::try_unwrap(done)
                    .ok()
                    .filter(|b| b.len() == CHUNK)
                    .unwrap_or_else(|| vec![0; CHUNK]);
                let len = match source {
                    Source::File { file, offset, len } => At {
                        file,
                        offset: *offset,
                        len: *len,
                    }
                    .fill(index, &mut buf)?,
                    Source::Stream(input) => fill_stream(input, &mut buf)?,
                };
                hasher.update(&buf[..len]);
                *bytes += len as u64;
                (Arc::new(buf), len)
            }
            Feed::Split {
                odds,
                evens,
                evens_back,
            } => {
                if index % 2 == 1 {
                    // The chunk done is an even one: the hashing thread's to reuse.
                    let _ = evens_back.send(done);
                } else {
                    // One of ours: given back by the hashing thread once hashed (see `Pool`).
                    drop(done);
                }
                odds.read_ahead();
                if index % 2 == 1 {
                    odds.next_chunk()?
                } else {
                    evens.recv().map_err(|_| gone())??
                }
            }
        };
        self.next += 1;
        self.ended = len < CHUNK;
        self.read.set(self.read.get() + len as u64);
        (self.current, self.end) = (chunk, len);
        Ok(())
    }
}

fn gone() -> io::Error {
    io::Error::other("the hashing thread stopped")
}

impl<R: Read> Read for Chunks<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Chunks<'_, R> {
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

/// The hashing thread of a split read: read the even chunks (ahead, while buffers are free),
/// hand each to the consumer, and hash every chunk in order, the odd ones as the consumer
/// sends them, giving those back once hashed. Stops at the blob's first short chunk, at an
/// error (the consumer has it too), or when the consumer is gone. Returns the hasher and the
/// bytes hashed.
fn hash_split(
    mut evens: Share<'_>,
    odds: Receiver<io::Result<Chunk>>,
    odds_back: Sender<Arc<Vec<u8>>>,
) -> (Sha256, u64) {
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    for index in 0.. {
        evens.read_ahead();
        let got = if index % 2 == 0 {
            evens.next_chunk()
        } else {
            odds.recv().unwrap_or_else(|_| Err(gone()))
        };
        let Ok((chunk, len)) = got else { break };
        hasher.update(&chunk[..len]);
        bytes += len as u64;
        if index % 2 == 1 {
            let _ = odds_back.send(chunk);
        }
        if len < CHUNK {
            break;
        }
    }
    (hasher, bytes)
}

/// Hand the blob of `source` to `consume` as a [`BufRead`], hashed as `hashing` says as it is
/// read, counted into `read`. Returns what `consume` returned, the hasher and the bytes hashed
/// (the blob's digest and size once `consume` has read to the end), or the error of starting
/// the thread.
pub fn read_hashed<R: Read, T>(
    source: Source<R>,
    read: Rc<Cell<u64>>,
    hashing: Hashing,
    consume: impl FnOnce(&mut Chunks<'_, R>) -> T,
) -> io::Result<(T, Sha256, u64)> {
    let chunks = |feed| Chunks {
        feed,
        current: Arc::default(),
        start: 0,
        end: 0,
        next: 0,
        ended: false,
        read,
    };
    let (file, offset, len) = match (hashing, source) {
        (Hashing::Thread, Source::File { file, offset, len }) => (file, offset, len),
        (_, source) => {
            let mut chunks = chunks(Feed::Inline {
                source,
                hasher: Sha256::new(),
                bytes: 0,
            });
            let out = consume(&mut chunks);
            return match chunks.feed {
                Feed::Inline { hasher, bytes, .. } => Ok((out, hasher, bytes)),
                Feed::Split { .. } => Err(gone()), // made inline above
            };
        }
    };
    let at = At {
        file: &file,
        offset,
        len,
    };
    std::thread::scope(|scope| {
        let (evens_tx, evens_rx) = channel();
        let (evens_back, evens_returned) = channel();
        let (odds_tx, odds_rx) = channel();
        let (odds_back, odds_returned) = channel();
        let evens = Share::new(at, 0, Pool::new(evens_returned), evens_tx);
        let hashing = std::thread::Builder::new()
            .name("layer-digest".into())
            .spawn_scoped(scope, move || hash_split(evens, odds_rx, odds_back))?;
        let mut chunks = chunks(Feed::Split {
            odds: Share::new(at, 1, Pool::new(odds_returned), odds_tx),
            evens: evens_rx,
            evens_back,
        });
        let out = consume(&mut chunks);
        // Its channels closed: the thread finishes the chunk it has, then stops.
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
    use std::io::{Seek, Write};

    use super::*;

    /// `data` in a file after `pad` other bytes (and as many after it).
    fn file_with(data: &[u8], pad: usize) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![0xee; pad]).unwrap();
        f.write_all(data).unwrap();
        f.write_all(&vec![0xee; pad]).unwrap();
        f.rewind().unwrap();
        f
    }

    /// Every way a blob of `data` is read: a split file (of its exact length, and to the end
    /// of the file), an inline file, an inline stream.
    fn sources(data: &[u8]) -> Vec<(Source<&[u8]>, Hashing)> {
        let bounded = |pad| Source::File {
            file: file_with(data, pad),
            offset: pad as u64,
            len: Some(data.len() as u64),
        };
        let to_end = Source::File {
            file: file_with(data, 0),
            offset: 0,
            len: None,
        };
        vec![
            (bounded(1000), Hashing::Thread),
            (to_end, Hashing::Thread),
            (bounded(7), Hashing::Inline),
            (Source::Stream(data), Hashing::Inline),
            (Source::Stream(data), Hashing::Thread),
        ]
    }

    #[test]
    fn the_digest_and_count_are_of_the_bytes_handed_over_across_chunks() {
        for len in [
            0,
            1,
            CHUNK - 1,
            CHUNK,
            2 * CHUNK,
            3 * CHUNK + 17,
            (4 * POOL + 3) * CHUNK,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            for (source, hashing) in sources(&data) {
                let read = Rc::new(Cell::new(0));
                let (out, hasher, bytes) = read_hashed(source, read.clone(), hashing, |c| {
                    let mut all = Vec::new();
                    c.read_to_end(&mut all).unwrap();
                    all
                })
                .unwrap();
                assert_eq!(out, data, "{len}");
                assert_eq!(bytes, data.len() as u64, "{len}");
                assert_eq!(read.get(), data.len() as u64, "{len}");
                assert_eq!(hasher.finalize()[..], Sha256::digest(&data)[..], "{len}");
            }
        }
    }

    #[test]
    fn a_consumer_that_stops_early_reads_no_further_and_the_thread_stops() {
        let (first, _, bytes) = read_hashed(
            Source::Stream(io::repeat(1)),
            Rc::default(),
            Hashing::Inline,
            |c| c.fill_buf().unwrap().len(),
        )
        .unwrap();
        assert_eq!((first, bytes), (CHUNK, CHUNK as u64));
        // A split read runs at most its buffers ahead of a consumer that stopped.
        let data = vec![3u8; 8 * POOL * CHUNK];
        let source: Source<&[u8]> = Source::File {
            file: file_with(&data, 0),
            offset: 0,
            len: None,
        };
        let (first, _, bytes) = read_hashed(source, Rc::default(), Hashing::Thread, |c| {
            c.fill_buf().unwrap().len()
        })
        .unwrap();
        assert_eq!(first, CHUNK);
        assert!(bytes <= (2 * POOL * CHUNK) as u64, "{bytes}");
    }

    #[test]
    fn a_read_error_reaches_the_consumer() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("gone"))
            }
        }
        let (got, _, _) = read_hashed(
            Source::Stream(Failing),
            Rc::default(),
            Hashing::Inline,
            |c| c.fill_buf().is_err(),
        )
        .unwrap();
        assert!(got);
        // A descriptor open for writing only fails every read, on either thread.
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("w")).unwrap();
        file.write_all_at(&[1; 100], 0).unwrap();
        let source: Source<&[u8]> = Source::File {
            file,
            offset: 0,
            len: None,
        };
        let (got, _, _) = read_hashed(source, Rc::default(), Hashing::Thread, |c| {
            c.fill_buf().is_err()
        })
        .unwrap();
        assert!(got);
    }
}

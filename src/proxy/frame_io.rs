//! Frames in and out of a connection's buffers: reading the next bytes of a frame into place
//! (room made once for the whole frame, or for what the request memory allows), and writing a
//! frame with its length prefix in one vectored write. No parsing: `wire::frame` decodes.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};

use crate::wire::frame::{length_prefix, FrameDecoder, LENGTH_PREFIX_BYTES};

/// Reads more bytes of the frame at the front of `buf` from `r`; the count read (0: end of
/// stream). Once the frame's length prefix is in, `buf` gets room for the whole frame at once
/// (a length the decoder accepts: at most `max_frame_bytes`), so a large Fetch response or
/// Produce request is read straight into place; before that, and for a frame already
/// complete, at least 4 KiB. Growing by a fixed step instead copied a frame of several MB
/// each time its last few KiB were due (seen as `BytesMut::reserve` → `memcpy` in a profile
/// of consume through the proxy).
///
/// `budget`: at most this many bytes are read, and room is made for no more (a request's
/// bytes charged to the request memory so far, `limits::RequestMemory::charge`); `None` for
/// responses from the destination broker. A budget of 0 reads nothing and returns 0.
pub async fn read_more<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
    budget: Option<usize>,
) -> std::io::Result<usize> {
    let missing = match decoder.peek_length(buf) {
        Ok(Some(length)) => (length + LENGTH_PREFIX_BYTES).saturating_sub(buf.len()),
        _ => 0,
    };
    let missing = budget.map_or(missing, |b| missing.min(b));
    if missing > 0 {
        buf.reserve(missing);
    } else if buf.capacity() - buf.len() < 4096 {
        buf.reserve(8192);
    }
    match budget {
        Some(b) => r.take(b as u64).read_buf(buf).await,
        None => r.read_buf(buf).await,
    }
}

/// Writes `frame` with its length prefix. One vectored write: a frame larger than the
/// buffer goes straight to the socket together with its prefix (two writes sent the 4-byte
/// prefix in a TCP segment of its own, TCP_NODELAY being on); a small one is buffered.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut BufWriter<W>, frame: &Bytes) -> std::io::Result<()> {
    let prefix = length_prefix(frame.len());
    w.write_all_buf(&mut Buf::chain(prefix.as_slice(), frame.clone())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out `chunk` bytes per read, as a socket does.
    struct Chunked<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl AsyncRead for Chunked<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            out: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let n = self.chunk.min(self.data.len()).min(out.remaining());
            out.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_large_frame_is_read_into_one_buffer_without_being_moved() {
        let body = vec![7u8; 3 << 20];
        let mut wire = length_prefix(body.len()).to_vec();
        wire.extend_from_slice(&body);
        let decoder = FrameDecoder::new(8 << 20);
        let mut r = Chunked { data: &wire, chunk: 60 * 1024 };
        let mut buf = BytesMut::with_capacity(8192);
        let mut start: Option<*const u8> = None;
        let frame = loop {
            if let Some(f) = decoder.decode(&mut buf).unwrap() {
                break f;
            }
            let prefix_known = buf.len() >= LENGTH_PREFIX_BYTES;
            assert!(read_more(&mut r, &mut buf, &decoder, None).await.unwrap() > 0, "stream ended early");
            // From the first read after the length prefix came in (which makes room for the
            // whole frame), the frame stays where it is.
            if prefix_known {
                match start {
                    None => start = Some(buf.as_ptr()),
                    Some(p) => assert_eq!(p, buf.as_ptr(), "the frame was moved (copied) at {} bytes", buf.len()),
                }
            }
        };
        assert_eq!(frame.len(), body.len());
        assert!(frame.iter().all(|b| *b == 7));
    }

    #[tokio::test]
    async fn a_frame_longer_than_the_limit_is_not_reserved() {
        let mut wire = length_prefix(100 << 20).to_vec();
        wire.extend_from_slice(&[0u8; 16]);
        let decoder = FrameDecoder::new(1 << 20);
        let mut r = Chunked { data: &wire, chunk: 4096 };
        let mut buf = BytesMut::with_capacity(8192);
        read_more(&mut r, &mut buf, &decoder, None).await.unwrap();
        read_more(&mut r, &mut buf, &decoder, None).await.unwrap();
        assert!(buf.capacity() < 1 << 20, "reserved {} bytes for a refused length", buf.capacity());
        assert!(decoder.decode(&mut buf).is_err());
    }

    /// With a budget (request bytes charged so far), a read takes at most the budget and
    /// makes room for no more, however long the announced frame.
    #[tokio::test]
    async fn a_budget_bounds_the_read_and_the_room_made() {
        let mut wire = length_prefix(100 << 20).to_vec();
        wire.extend_from_slice(&[5u8; 200_000]);
        let decoder = FrameDecoder::new(128 << 20);
        let mut r = Chunked { data: &wire, chunk: 150_000 };
        let mut buf = BytesMut::with_capacity(16);
        read_more(&mut r, &mut buf, &decoder, Some(16)).await.unwrap();
        assert_eq!(buf.len(), 16, "the prefix and the first bytes, before the length is known");
        let n = read_more(&mut r, &mut buf, &decoder, Some(65_536)).await.unwrap();
        assert_eq!(n, 65_536);
        assert!(buf.capacity() < 1 << 20, "room made for {} bytes of an unpaid 100 MiB frame", buf.capacity());
        assert_eq!(read_more(&mut r, &mut buf, &decoder, Some(0)).await.unwrap(), 0);
    }

    /// A writer that records the size of each write it gets and takes at most `max` bytes of
    /// one (a socket's send buffer), vectored or not.
    struct Recording {
        out: Vec<u8>,
        writes: Vec<usize>,
        vectored: bool,
        max: usize,
    }

    impl AsyncWrite for Recording {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            data: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = data.len().min(self.max);
            self.out.extend_from_slice(&data[..n]);
            self.writes.push(n);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            slices: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let mut n = 0;
            for s in slices {
                let take = s.len().min(self.max - n);
                self.out.extend_from_slice(&s[..take]);
                n += take;
            }
            self.writes.push(n);
            std::task::Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    async fn written(vectored: bool, max: usize, frames: &[Bytes]) -> Recording {
        let mut w = BufWriter::with_capacity(64 * 1024, Recording { out: vec![], writes: vec![], vectored, max });
        for f in frames {
            write_frame(&mut w, f).await.unwrap();
        }
        w.flush().await.unwrap();
        w.into_inner()
    }

    fn wire_of(frames: &[Bytes]) -> Vec<u8> {
        frames.iter().flat_map(|f| length_prefix(f.len()).into_iter().chain(f.iter().copied())).collect()
    }

    #[tokio::test]
    async fn a_large_frame_goes_out_with_its_prefix_in_one_write() {
        let frame = Bytes::from((0..300_000u32).map(|i| i as u8).collect::<Vec<_>>());
        let w = written(true, usize::MAX, std::slice::from_ref(&frame)).await;
        assert_eq!(w.writes, vec![frame.len() + LENGTH_PREFIX_BYTES], "prefix and body in one write");
        assert_eq!(w.out, wire_of(&[frame]));
    }

    #[tokio::test]
    async fn frames_are_written_whole_in_order_whatever_the_writer_takes() {
        let frames: Vec<Bytes> = [10usize, 70_000, 3, 200_000, 65_532, 1]
            .iter()
            .enumerate()
            .map(|(k, n)| Bytes::from(vec![k as u8 + 1; *n]))
            .collect();
        for (vectored, max) in [(true, usize::MAX), (true, 1000), (true, 3), (false, usize::MAX), (false, 4099)] {
            let w = written(vectored, max, &frames).await;
            assert_eq!(w.out, wire_of(&frames), "vectored {vectored}, {max} bytes a write");
        }
    }
}

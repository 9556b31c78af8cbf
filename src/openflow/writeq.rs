//! Bytes waiting for the socket, written with vectored writes so that frames queued by many
//! tasks leave in one system call.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;

use bytes::{Buf, Bytes};
use tokio::io::AsyncWrite;

/// How many queued chunks one `writev` may carry.
const MAX_IOV: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    chunks: VecDeque<Bytes>,
    len: usize,
}

impl WriteQueue {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.len += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// Queued bytes not yet written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes as much as the socket takes in one call. Cancel-safe: if the future is dropped
    /// before it completes, nothing was written.
    pub(crate) async fn write_some<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        writer: &mut W,
    ) -> io::Result<usize> {
        let written = std::future::poll_fn(|cx| {
            let slices: Vec<IoSlice<'_>> = self
                .chunks
                .iter()
                .take(MAX_IOV)
                .map(|chunk| IoSlice::new(chunk))
                .collect();
            Pin::new(&mut *writer).poll_write_vectored(cx, &slices)
        })
        .await?;
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "switch socket accepted no bytes",
            ));
        }
        self.consume(written);
        Ok(written)
    }

    fn consume(&mut self, mut written: usize) {
        self.len -= written;
        while written > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            if front.len() > written {
                front.advance(written);
                return;
            }
            written -= front.len();
            self.chunks.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn writes_everything_in_order() {
        let (mut client, mut server) = tokio::io::duplex(7);
        let mut queue = WriteQueue::default();
        for chunk in ["abc", "", "defgh", "ij"] {
            queue.push(Bytes::from(chunk));
        }
        assert_eq!(queue.len(), 10);
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; 10];
            server.read_exact(&mut got).await.unwrap();
            got
        });
        while !queue.is_empty() {
            queue.write_some(&mut client).await.unwrap();
        }
        assert_eq!(reader.await.unwrap(), b"abcdefghij");
    }
}

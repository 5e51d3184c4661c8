//! Problem documents for the requests hyper refuses itself.
//!
//! When hyper cannot parse a request's head it answers on its own and closes the
//! connection, before any service runs: `400 Bad Request` (a malformed request line,
//! method, URI, version or header), `414 URI Too Long` or `431 Request Header Fields
//! Too Large`, each with an empty body. Hyper 1 has no hook for that answer
//! (`Http11Transaction::on_error` in `proto/h1/role.rs` builds a bare head, and the
//! server builders offer no setting for it).
//!
//! So the connection's socket is wrapped: a write that starts one of those automatic
//! answers is replaced by the same status as problem JSON. It is recognised by its
//! status line (400, 414 or 431) and by a head without `content-type`: every answer of
//! this server's own code carries one, hyper's automatic answers never do. Everything
//! else passes through untouched.
//!
//! Not covered, because hyper writes nothing to replace: a head that does not arrive
//! within the header read timeout, a client that sends HTTP/2's preface, and a
//! connection closed in the middle of a head. Those connections are closed without an
//! answer.

use shared::http::ApiError;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A socket whose automatic error answers from hyper become problem documents.
pub struct ProblemIo<S> {
    inner: S,
    /// The replacement answer still to be written, and how much of it is written.
    pending: Vec<u8>,
    sent: usize,
}

impl<S> ProblemIo<S> {
    pub fn new(inner: S) -> Self {
        ProblemIo { inner, pending: Vec::new(), sent: 0 }
    }
}

impl<S: AsyncWrite + Unpin> ProblemIo<S> {
    /// Writes what is left of a replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Takes `answer` in place of hyper's; it is written now or on the next write or flush.
    fn replace(&mut self, cx: &mut Context<'_>, answer: Vec<u8>) -> io::Result<()> {
        self.pending = answer;
        self.sent = 0;
        match self.poll_pending(cx) {
            Poll::Ready(result) => result,
            Poll::Pending => Ok(()),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ProblemIo<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ProblemIo<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(answer) = problem_for(buf) {
            this.replace(cx, answer)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && let Some(answer) = problem_for(first)
        {
            this.replace(cx, answer)?;
            // Only the head is taken; any further slices come again in the next write.
            return Poll::Ready(Ok(first.len()));
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// The problem answer in place of `bytes`, if they are one of hyper's automatic error
/// answers: a whole head with status 400, 414 or 431 and no `content-type`.
pub fn problem_for(bytes: &[u8]) -> Option<Vec<u8>> {
    let error = match bytes.get(..13)? {
        b"HTTP/1.1 400 " | b"HTTP/1.0 400 " => ApiError::BadRequest("The request line or a header is malformed."),
        b"HTTP/1.1 414 " | b"HTTP/1.0 414 " => ApiError::UriTooLong,
        b"HTTP/1.1 431 " | b"HTTP/1.0 431 " => ApiError::HeadersTooLarge,
        _ => return None,
    };
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut kept = Vec::new();
    for line in lines {
        let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        match name.as_str() {
            "content-type" => return None,
            "content-length" | "transfer-encoding" | "connection" => {}
            _ => kept.push(line),
        }
    }
    let reply = error.into_reply();
    let mut answer = format!("{status_line}\r\n");
    for line in kept {
        answer.push_str(line);
        answer.push_str("\r\n");
    }
    answer.push_str(&format!(
        "content-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        reply.content_type,
        reply.body.len()
    ));
    let mut answer = answer.into_bytes();
    answer.extend_from_slice(&reply.body);
    Some(answer)
}

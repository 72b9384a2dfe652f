//! Reading one HTTP/1.1 response from a byte stream, for the `--rate max` engine.
//!
//! Why not hyper here: at `--rate max` every instruction the generator spends is taken from the
//! server it measures (two cores), and hyper's client costs ~14 k instructions per request
//! (header map, dispatch channel, body frames) where wrk spends ~4.5 k in all. The parsing
//! itself is `httparse` (the parser inside hyper); this module only adds the message framing
//! of RFC 9112 §6 around it: `Content-Length`, `chunked` (sizes parsed by
//! [`httparse::parse_chunk_size`]), read-until-close, and the responses that have no body.
//! The open-loop engine keeps hyper.

use crate::client::Outcome;
use crate::record::ErrorKind;
use hyper::header::HeaderName;

/// Response heads larger than this are an error (hyper's limit is of the same order).
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;
/// Headers parsed per response at most.
const MAX_HEADERS: usize = 64;

/// What [`ResponseReader::feed`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Feed {
    /// The response is not complete yet: feed more bytes.
    More,
    /// The response is complete; `extra` = bytes followed it in the same input (the server
    /// sent more than one response: the connection cannot be trusted for another request).
    Done {
        /// Bytes after the end of the response.
        extra: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// The head is not complete.
    Head,
    /// `remaining` body bytes by Content-Length.
    Length(u64),
    /// Chunked, at the given step.
    Chunked(Chunk),
    /// No framing: the body ends when the server closes the connection.
    UntilClose,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// `remaining` bytes of chunk data.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk, up to an empty line.
    Trailers,
}

/// An incremental reader of one response; [`reset`](Self::reset) it for the next one.
pub(crate) struct ResponseReader {
    capture: Option<HeaderName>,
    /// The request was a HEAD: the response has no body whatever its headers say.
    head_request: bool,
    /// Bytes of an incomplete head, or of an incomplete chunk-size/trailer line.
    pending: Vec<u8>,
    body: Body,
    status: u16,
    header: Option<String>,
    close: bool,
    bytes: u64,
}

impl ResponseReader {
    /// A reader capturing the value of header `capture` (if any) of each response.
    pub(crate) fn new(capture: Option<HeaderName>) -> ResponseReader {
        ResponseReader {
            capture,
            head_request: false,
            pending: Vec::new(),
            body: Body::Head,
            status: 0,
            header: None,
            close: false,
            bytes: 0,
        }
    }

    /// Prepare for the response to a new request (`head_request`: it was a HEAD).
    pub(crate) fn reset(&mut self, head_request: bool) {
        self.head_request = head_request;
        self.pending.clear();
        self.body = Body::Head;
        self.status = 0;
        self.header = None;
        self.close = false;
        self.bytes = 0;
    }

    /// Take in the next bytes read from the connection.
    pub(crate) fn feed(&mut self, mut input: &[u8]) -> Result<Feed, ErrorKind> {
        loop {
            match self.body {
                Body::Done => {
                    return Ok(Feed::Done {
                        extra: !input.is_empty(),
                    });
                }
                _ if input.is_empty() => return Ok(Feed::More),
                Body::Head => {
                    // The common case, a head that arrived whole, is parsed in place.
                    let used = if self.pending.is_empty() {
                        match self.head(input)? {
                            Some(n) => n,
                            None => {
                                self.keep_pending(input, MAX_HEAD)?;
                                return Ok(Feed::More);
                            }
                        }
                    } else {
                        let before = self.pending.len();
                        self.keep_pending(input, MAX_HEAD)?;
                        let pending = std::mem::take(&mut self.pending);
                        let parsed = self.head(&pending);
                        self.pending = pending;
                        match parsed? {
                            Some(n) => {
                                self.pending.clear();
                                n - before
                            }
                            None => return Ok(Feed::More),
                        }
                    };
                    input = &input[used..];
                }
                Body::Length(remaining) => {
                    let n = remaining.min(input.len() as u64);
                    self.bytes += n;
                    input = &input[n as usize..];
                    self.body = if n == remaining {
                        Body::Done
                    } else {
                        Body::Length(remaining - n)
                    };
                }
                Body::UntilClose => {
                    self.bytes += input.len() as u64;
                    return Ok(Feed::More);
                }
                Body::Chunked(Chunk::Data(remaining)) => {
                    let n = remaining.min(input.len() as u64);
                    self.bytes += n;
                    input = &input[n as usize..];
                    self.body = Body::Chunked(if n == remaining {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(remaining - n)
                    });
                }
                Body::Chunked(step) => {
                    // A line: a chunk size, the CRLF after data, or a trailer.
                    let Some(nl) = input.iter().position(|&b| b == b'\n') else {
                        self.keep_pending(input, MAX_LINE)?;
                        return Ok(Feed::More);
                    };
                    self.keep_pending(&input[..=nl], MAX_LINE)?;
                    input = &input[nl + 1..];
                    let line = std::mem::take(&mut self.pending);
                    let bare = line
                        .strip_suffix(b"\r\n")
                        .unwrap_or(&line[..line.len() - 1]);
                    self.body = match step {
                        Chunk::Size => match httparse::parse_chunk_size(&line) {
                            Ok(httparse::Status::Complete((_, 0))) => {
                                Body::Chunked(Chunk::Trailers)
                            }
                            Ok(httparse::Status::Complete((_, n))) => Body::Chunked(Chunk::Data(n)),
                            _ => return Err(ErrorKind::Other),
                        },
                        Chunk::DataEnd if bare.is_empty() => Body::Chunked(Chunk::Size),
                        Chunk::DataEnd => return Err(ErrorKind::Other),
                        Chunk::Trailers if bare.is_empty() => Body::Done,
                        Chunk::Trailers => Body::Chunked(Chunk::Trailers),
                        Chunk::Data(_) => unreachable!("handled above"),
                    };
                    self.pending = line;
                    self.pending.clear();
                }
            }
        }
    }

    /// The connection reached its end (the peer closed it): the response if that completes
    /// it (a body delimited by the close), `Closed` if it was cut short.
    pub(crate) fn eof(&mut self) -> Result<Outcome, ErrorKind> {
        match self.body {
            Body::UntilClose | Body::Done => {
                self.body = Body::Done;
                Ok(self.outcome())
            }
            _ => Err(ErrorKind::Closed),
        }
    }

    /// The complete response (after [`Feed::Done`] or a successful [`eof`](Self::eof)).
    pub(crate) fn outcome(&mut self) -> Outcome {
        Outcome {
            status: self.status,
            bytes: self.bytes,
            header: self.header.take(),
            reusable: !self.close && self.body == Body::Done,
        }
    }

    fn keep_pending(&mut self, bytes: &[u8], limit: usize) -> Result<(), ErrorKind> {
        if self.pending.len() + bytes.len() > limit {
            return Err(ErrorKind::Other);
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    /// Parse a head at the start of `buf`: its length, or `None` if it is not complete.
    fn head(&mut self, buf: &[u8]) -> Result<Option<usize>, ErrorKind> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(ErrorKind::Other),
        };
        let status = resp.code.unwrap_or(0);
        // An interim response (100 Continue, 103 Early Hints): the real one follows.
        if (100..200).contains(&status) && status != 101 {
            return Ok(Some(len));
        }
        self.status = status;
        let (mut length, mut chunked) = (None::<u64>, false);
        let mut keep_alive = resp.version == Some(1);
        for h in resp.headers.iter() {
            let v = h.value;
            if h.name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(ErrorKind::Other)?;
                if length.is_some_and(|l| l != n) {
                    return Err(ErrorKind::Other);
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Chunked only counts as the last coding (RFC 9112 §6.3).
                chunked = v
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in v.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                        self.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && !self.close {
                        keep_alive = true;
                    }
                }
            }
            if self
                .capture
                .as_ref()
                .is_some_and(|c| h.name.eq_ignore_ascii_case(c.as_str()))
                && self.header.is_none()
            {
                self.header = Some(String::from_utf8_lossy(v).into_owned());
            }
        }
        self.close |= !keep_alive;
        self.body = if self.head_request || status == 204 || status == 304 || status == 101 {
            Body::Done
        } else if chunked {
            Body::Chunked(Chunk::Size)
        } else if let Some(n) = length {
            if n == 0 { Body::Done } else { Body::Length(n) }
        } else {
            self.close = true;
            Body::UntilClose
        };
        if status == 101 {
            self.close = true;
        }
        Ok(Some(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> ResponseReader {
        ResponseReader::new(Some(HeaderName::from_static("x-backend")))
    }

    /// Feed `bytes` in pieces of `step`, return the outcome once done.
    fn read_in_steps(r: &mut ResponseReader, bytes: &[u8], step: usize) -> (Outcome, bool) {
        for (i, piece) in bytes.chunks(step).enumerate() {
            match r.feed(piece).unwrap() {
                Feed::More => {}
                Feed::Done { extra } => {
                    assert!(
                        extra || (i + 1) * step >= bytes.len(),
                        "done before the end without extra bytes"
                    );
                    return (r.outcome(), extra);
                }
            }
        }
        panic!("not done after {} bytes", bytes.len());
    }

    const CL: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Backend: 127.0.0.20:80\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: x\r\n\r\n";

    #[test]
    fn content_length_whole_and_byte_by_byte() {
        for step in [CL.len(), 1, 7] {
            let mut r = reader();
            let (o, extra) = read_in_steps(&mut r, CL, step);
            assert_eq!(
                (o.status, o.bytes, o.reusable, extra),
                (200, 5, true, false)
            );
            assert_eq!(o.header.as_deref(), Some("127.0.0.20:80"));
        }
    }

    #[test]
    fn chunked_with_extension_and_trailer_in_any_split() {
        for step in [CHUNKED.len(), 1, 2, 3, 5, 11] {
            let mut r = reader();
            let (o, extra) = read_in_steps(&mut r, CHUNKED, step);
            assert_eq!(
                (o.status, o.bytes, o.reusable, extra),
                (502, 9, true, false),
                "step {step}"
            );
            assert_eq!(o.header, None);
        }
    }

    #[test]
    fn reset_reads_the_next_response() {
        let mut r = reader();
        assert_eq!(r.feed(CL).unwrap(), Feed::Done { extra: false });
        r.outcome();
        r.reset(false);
        assert_eq!(r.feed(CHUNKED).unwrap(), Feed::Done { extra: false });
        assert_eq!(r.outcome().status, 502);
    }

    #[test]
    fn connection_close_and_http10_are_not_reusable() {
        let mut r = reader();
        r.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.outcome().reusable);
        r.reset(false);
        r.feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.outcome().reusable);
        r.reset(false);
        r.feed(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(r.outcome().reusable);
    }

    #[test]
    fn body_until_close_ends_at_eof_and_a_cut_body_is_closed() {
        let mut r = reader();
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\n\r\nabc").unwrap(), Feed::More);
        assert_eq!(r.feed(b"de").unwrap(), Feed::More);
        let o = r.eof().unwrap();
        assert_eq!((o.status, o.bytes, o.reusable), (200, 5, false));
        r.reset(false);
        assert_eq!(r.feed(&CL[..CL.len() - 2]).unwrap(), Feed::More);
        assert_eq!(r.eof().err(), Some(ErrorKind::Closed));
        r.reset(false);
        assert_eq!(r.eof().err(), Some(ErrorKind::Closed));
    }

    #[test]
    fn bodiless_responses_and_interim_responses() {
        let mut r = reader();
        r.reset(true);
        // A HEAD response announces a length it does not send.
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")
                .unwrap(),
            Feed::Done { extra: false }
        );
        assert_eq!(r.outcome().bytes, 0);
        for head in [
            &b"HTTP/1.1 204 No Content\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n",
        ] {
            r.reset(false);
            assert_eq!(r.feed(head).unwrap(), Feed::Done { extra: false });
            assert!(r.outcome().reusable);
        }
        r.reset(false);
        let mut with_100 = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        with_100.extend_from_slice(CL);
        let (o, _) = read_in_steps(&mut r, &with_100, 4);
        assert_eq!((o.status, o.bytes), (200, 5));
    }

    #[test]
    fn extra_bytes_and_malformed_input() {
        let mut r = reader();
        let mut two = CL.to_vec();
        two.extend_from_slice(CL);
        assert_eq!(r.feed(&two).unwrap(), Feed::Done { extra: true });
        for bad in [
            &b"HTTX/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
        ] {
            r.reset(false);
            assert_eq!(
                r.feed(bad).err(),
                Some(ErrorKind::Other),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        r.reset(false);
        let endless = vec![b'a'; MAX_HEAD + 1];
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.extend_from_slice(&endless);
        assert_eq!(r.feed(&head[..1000]).unwrap(), Feed::More);
        assert_eq!(r.feed(&head[1000..]).err(), Some(ErrorKind::Other));
    }
}

//! The bench's own HTTP/1.1 client: just enough to time list, get and watch requests
//! without a client library's overhead (requests written by hand, `Content-Length` and
//! chunked bodies decoded as they arrive, watch lines counted).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A response read in full.
#[derive(Debug)]
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) body: Vec<u8>,
}

impl Response {
    pub(super) fn json(&self) -> anyhow::Result<serde_json::Value> {
        anyhow::ensure!(
            self.status == 200,
            "HTTP {}: {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        );
        serde_json::from_slice(&self.body).context("the answer is not JSON")
    }
}

/// How a response's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyLength {
    Length(usize),
    Chunked,
    UntilClose,
}

/// A response head: status, how the body ends, and whether the connection closes after.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) body: BodyLength,
    pub(super) close: bool,
}

/// Parses a response head (the bytes before the empty line).
pub(super) fn parse_head(head: &[u8]) -> anyhow::Result<Head> {
    let text = std::str::from_utf8(head).context("the response head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or("");
    anyhow::ensure!(
        version.starts_with("HTTP/1."),
        "not an HTTP/1 response: {status_line:?}"
    );
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {status_line:?}"))?;
    let (mut length, mut chunked, mut close) = (None, false, version == "HTTP/1.0");
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .parse()
                        .with_context(|| format!("Content-Length {value:?}"))?,
                )
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "connection" => {
                let value = value.to_ascii_lowercase();
                if value.contains("close") {
                    close = true;
                } else if value.contains("keep-alive") {
                    close = false;
                }
            }
            _ => {}
        }
    }
    let body = match (chunked, length) {
        (true, _) => BodyLength::Chunked,
        (false, Some(n)) => BodyLength::Length(n),
        (false, None) if status == 204 || status == 304 || status < 200 => BodyLength::Length(0),
        (false, None) => BodyLength::UntilClose,
    };
    Ok(Head {
        status,
        body,
        close: close || body == BodyLength::UntilClose,
    })
}

/// Where a chunked body is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum ChunkState {
    /// In a chunk-size line.
    #[default]
    Size,
    /// In a chunk's data, this many bytes to go.
    Data(usize),
    /// In the line ending a chunk's data.
    DataEnd,
    /// In the trailer, after the last chunk.
    Trailer,
    /// Past the empty line ending the body.
    Done,
}

/// An incremental decoder of a chunked body.
#[derive(Debug, Default)]
pub(super) struct Chunked {
    pub(super) state: ChunkState,
    /// The part of a line read so far (size lines, data ends, trailers).
    pub(super) line: Vec<u8>,
}

impl Chunked {
    pub(super) fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes `input`, handing each piece of the body to `data`; returns the bytes
    /// consumed (all of them, unless the body ends within `input`).
    pub(super) fn feed(
        &mut self,
        input: &[u8],
        data: &mut impl FnMut(&[u8]),
    ) -> anyhow::Result<usize> {
        let mut at = 0;
        while at < input.len() {
            match self.state {
                ChunkState::Done => break,
                ChunkState::Data(left) => {
                    let take = left.min(input.len() - at);
                    data(&input[at..at + take]);
                    at += take;
                    self.state = if take == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - take)
                    };
                }
                ChunkState::Size | ChunkState::DataEnd | ChunkState::Trailer => {
                    let rest = &input[at..];
                    let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                        self.line.extend_from_slice(rest);
                        anyhow::ensure!(self.line.len() <= 4096, "a chunk line too long");
                        at = input.len();
                        continue;
                    };
                    self.line.extend_from_slice(&rest[..end]);
                    at += end + 1;
                    let line = std::mem::take(&mut self.line);
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    self.state = match self.state {
                        ChunkState::Size => {
                            let text = std::str::from_utf8(line).unwrap_or("");
                            let size = text.split(';').next().unwrap_or("").trim();
                            let size = usize::from_str_radix(size, 16)
                                .with_context(|| format!("chunk size {text:?}"))?;
                            if size == 0 {
                                ChunkState::Trailer
                            } else {
                                ChunkState::Data(size)
                            }
                        }
                        ChunkState::DataEnd => {
                            anyhow::ensure!(line.is_empty(), "chunk data longer than its size");
                            ChunkState::Size
                        }
                        _ if line.is_empty() => ChunkState::Done,
                        other => other,
                    };
                }
            }
        }
        Ok(at)
    }
}

/// The number of events (newline-terminated lines) in a piece of a watch's body.
pub(super) fn count_lines(data: &[u8]) -> usize {
    data.iter().filter(|&&b| b == b'\n').count()
}

pub(super) fn request(addr: SocketAddr, path: &str, accept: Option<&str>) -> String {
    request_with(addr, "GET", path, accept, None)
}

/// A request's head; with a body, its `Content-Type` and `Content-Length` (the body
/// follows the head).
pub(super) fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    accept: Option<&str>,
    body: Option<(&str, usize)>,
) -> String {
    let accept = accept.unwrap_or("application/json");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nUser-Agent: kcm-bench\r\n"
    );
    if let Some((content_type, length)) = body {
        head.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {length}\r\n"
        ));
    }
    head.push_str("\r\n");
    head
}

/// Reads from `stream` into `buf` until it holds a whole head; returns the head's length
/// with its empty line.
pub(super) async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<usize> {
    let mut searched = 0;
    loop {
        if let Some(at) = buf[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(searched + at + 4);
        }
        searched = buf.len().saturating_sub(3);
        anyhow::ensure!(buf.len() <= 64 * 1024, "a response head over 64 KiB");
        read_more(stream, buf).await?;
    }
}

pub(super) async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    buf.reserve(64 * 1024);
    let read = stream.read_buf(buf).await?;
    anyhow::ensure!(read > 0, "the server closed the connection");
    Ok(())
}

/// A keep-alive HTTP/1.1 client of one server: one request at a time.
pub(super) struct HttpClient {
    pub(super) addr: SocketAddr,
    /// The open connection and the bytes read past the last response.
    pub(super) connection: Option<(TcpStream, Vec<u8>)>,
}

impl HttpClient {
    pub(super) fn new(addr: SocketAddr) -> HttpClient {
        HttpClient {
            addr,
            connection: None,
        }
    }

    /// GETs `path`; a kept-alive connection the server has closed meanwhile is opened
    /// again once.
    pub(super) async fn get(
        &mut self,
        path: &str,
        accept: Option<&str>,
    ) -> anyhow::Result<Response> {
        self.send("GET", path, accept, None).await
    }

    /// Sends `method` to `path` with a body of (`Content-Type`, bytes), as [`Self::get`].
    pub(super) async fn send(
        &mut self,
        method: &str,
        path: &str,
        accept: Option<&str>,
        body: Option<(&str, &[u8])>,
    ) -> anyhow::Result<Response> {
        let reused = self.connection.is_some();
        match self.try_send(method, path, accept, body).await {
            Err(_) if reused => self.try_send(method, path, accept, body).await,
            result => result,
        }
        .with_context(|| format!("{method} http://{}{path}", self.addr))
    }

    pub(super) async fn try_send(
        &mut self,
        method: &str,
        path: &str,
        accept: Option<&str>,
        body: Option<(&str, &[u8])>,
    ) -> anyhow::Result<Response> {
        let (mut stream, mut buf) = match self.connection.take() {
            Some(connection) => connection,
            None => {
                let stream = TcpStream::connect(self.addr).await?;
                stream.set_nodelay(true)?;
                (stream, Vec::new())
            }
        };
        let length = body.map(|(content_type, bytes)| (content_type, bytes.len()));
        let mut message = request_with(self.addr, method, path, accept, length).into_bytes();
        message.extend_from_slice(body.map_or(&[][..], |(_, bytes)| bytes));
        stream.write_all(&message).await?;
        let head_length = read_head(&mut stream, &mut buf).await?;
        let head = parse_head(&buf[..head_length])?;
        buf.drain(..head_length);
        let body = match head.body {
            BodyLength::Length(n) => {
                // Room for the whole body at once, as a client reading a Content-Length does.
                buf.reserve(n.saturating_sub(buf.len()));
                while buf.len() < n {
                    read_more(&mut stream, &mut buf).await?;
                }
                let rest = buf.split_off(n);
                std::mem::replace(&mut buf, rest)
            }
            BodyLength::Chunked => {
                let (mut decoder, mut body) = (Chunked::default(), Vec::new());
                loop {
                    let used = decoder.feed(&buf, &mut |d| body.extend_from_slice(d))?;
                    buf.drain(..used);
                    if decoder.is_done() {
                        break body;
                    }
                    read_more(&mut stream, &mut buf).await?;
                }
            }
            BodyLength::UntilClose => {
                stream.read_to_end(&mut buf).await?;
                std::mem::take(&mut buf)
            }
        };
        if !head.close {
            self.connection = Some((stream, buf));
        }
        Ok(Response {
            status: head.status,
            body,
        })
    }
}

/// An HTTP watch whose response head has been read: its body, a chunked stream of one
/// event per line.
pub(super) struct HttpWatch {
    pub(super) stream: TcpStream,
    pub(super) decoder: Chunked,
    /// Body bytes read with the head.
    pub(super) early: Vec<u8>,
}

impl HttpWatch {
    pub(super) async fn open(addr: SocketAddr, path: &str) -> anyhow::Result<HttpWatch> {
        let opened = async {
            let mut stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            stream
                .write_all(request(addr, path, None).as_bytes())
                .await?;
            let mut buf = Vec::new();
            let head_length = read_head(&mut stream, &mut buf).await?;
            let head = parse_head(&buf[..head_length])?;
            anyhow::ensure!(
                head.status == 200 && head.body == BodyLength::Chunked,
                "HTTP {} ({:?}): {}",
                head.status,
                head.body,
                String::from_utf8_lossy(&buf[head_length..])
            );
            Ok(HttpWatch {
                stream,
                decoder: Chunked::default(),
                early: buf.split_off(head_length),
            })
        };
        tokio::time::timeout(Duration::from_secs(30), opened)
            .await
            .context("no answer within 30s")?
            .with_context(|| format!("watch http://{addr}{path}"))
    }

    /// Reads until `n` events have arrived.
    ///
    /// # Errors
    /// When the stream ends first (the server ends a watch that fell too far behind).
    pub(super) async fn count_events(&mut self, n: usize) -> anyhow::Result<()> {
        let mut events = 0;
        let early = std::mem::take(&mut self.early);
        self.decoder
            .feed(&early, &mut |d| events += count_lines(d))?;
        loop {
            if events >= n {
                return Ok(());
            }
            anyhow::ensure!(
                !self.decoder.is_done(),
                "the watch ended after {events} of {n} events"
            );
            self.stream.readable().await?;
            // On this task's stack, not in its future: a thousand watches hold no buffer.
            let mut buf = [0u8; 32 * 1024];
            match self.stream.try_read(&mut buf) {
                Ok(0) => anyhow::bail!("the connection closed after {events} of {n} events"),
                Ok(read) => {
                    self.decoder
                        .feed(&buf[..read], &mut |d| events += count_lines(d))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::api::TABLE;

    fn decode_in_pieces(body: &[u8], piece: usize) -> (Vec<u8>, usize, bool) {
        let (mut decoder, mut out, mut consumed) = (Chunked::default(), Vec::new(), 0);
        for part in body.chunks(piece) {
            consumed += decoder
                .feed(part, &mut |d| out.extend_from_slice(d))
                .unwrap();
            if decoder.is_done() {
                break;
            }
        }
        (out, consumed, decoder.is_done())
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_reads_split() {
        let (first, second) = ("{\"a\":1}", "{\"type\":\"ADDED\"}\n{\"b\":2}\n");
        let body = format!(
            "{:x}\r\n{first}\r\n{:X};ext=1\r\n{second}\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT",
            first.len(),
            second.len()
        );
        let body = body.as_bytes();
        let expected = format!("{first}{second}").into_bytes();
        for piece in [1, 2, 3, 5, 8, 13, body.len()] {
            let (out, consumed, done) = decode_in_pieces(body, piece);
            assert_eq!(out, expected, "pieces of {piece}");
            assert!(done, "pieces of {piece}");
            if piece == body.len() {
                assert_eq!(consumed, body.len() - 4, "the next response is left");
            }
        }
        assert_eq!(count_lines(&expected), 2);
    }

    #[test]
    fn an_unfinished_chunked_body_is_not_done() {
        let (out, consumed, done) = decode_in_pieces(b"5\r\nabc", 100);
        assert_eq!((out.as_slice(), consumed, done), (&b"abc"[..], 6, false));
        let mut decoder = Chunked::default();
        assert!(decoder.feed(b"zz\r\n", &mut |_| {}).is_err(), "not hex");
        let mut decoder = Chunked::default();
        assert!(
            decoder.feed(b"2\r\nabc\r\n", &mut |_| {}).is_err(),
            "data longer than its size"
        );
    }

    #[track_caller]
    fn check_head(head: &str, expected: (u16, BodyLength, bool)) {
        let parsed = parse_head(head.as_bytes()).unwrap();
        assert_eq!(
            (parsed.status, parsed.body, parsed.close),
            expected,
            "{head}"
        );
    }

    #[test]
    fn response_heads_say_how_the_body_ends() {
        check_head(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 42",
            (200, BodyLength::Length(42), false),
        );
        check_head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-length: 3",
            (200, BodyLength::Chunked, false),
        );
        check_head(
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close",
            (404, BodyLength::Length(0), true),
        );
        check_head("HTTP/1.1 200 OK", (200, BodyLength::UntilClose, true));
        check_head(
            "HTTP/1.1 204 No Content",
            (204, BodyLength::Length(0), false),
        );
        check_head(
            "HTTP/1.0 200 OK\r\nContent-Length: 1",
            (200, BodyLength::Length(1), true),
        );
        assert!(parse_head(b"SSH-2.0-OpenSSH").is_err());
        assert!(parse_head(b"HTTP/1.1 OK").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x").is_err());
    }

    #[test]
    fn requests_are_http_1_1_gets_asking_for_a_representation() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 8080));
        assert_eq!(
            request(addr, "/api/v1/pods", Some(TABLE)),
            "GET /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: application/json;as=Table;v=v1;g=meta.k8s.io\r\nUser-Agent: kcm-bench\r\n\r\n"
        );
        assert_eq!(
            request_with(addr, "PUT", "/x", None, Some(("application/json", 2))),
            "PUT /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: application/json\r\nUser-Agent: kcm-bench\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
        );
    }
}

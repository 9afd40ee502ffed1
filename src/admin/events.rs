//! `/events`: the node's lifecycle events as Server-Sent Events.

use std::convert::Infallible;

use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::Response;

use super::reply::Body;
use crate::events::{lines, Subscriber};
use crate::shared::Shared;

/// `/events`: the node's events from now on as Server-Sent Events, each `id:` its `seq` and
/// each `data:` one line of `lintel watch`. A reader that falls a whole event ring behind gets
/// a `missed` line first; the connection's own write buffer is all it holds besides the ring.
pub(super) fn stream(shared: &Shared) -> Response<Body> {
    let subscriber = shared.dispatcher.registry().events().subscribe(&[]);
    let stream =
        futures_util::stream::unfold(subscriber, |mut subscriber: Subscriber| async move {
            let delivery = subscriber.next().await?;
            let (seq, at_unix_ms, event) = delivery.parts();
            let mut text = String::new();
            for line in lines(seq, at_unix_ms, &event) {
                text.push_str(&format!("id: {seq}\ndata: {line}\n\n"));
            }
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(text))),
                subscriber,
            ))
        });
    // A comment first, so the reader sees the stream open before the first event.
    let opened = futures_util::stream::once(async {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b": lintel events\n\n")))
    });
    let mut response = Response::new(StreamBody::new(opened.chain(stream)).boxed_unsync());
    let headers = response.headers_mut();
    for (name, value) in [
        (hyper::header::CONTENT_TYPE, "text/event-stream"),
        (hyper::header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    response
}

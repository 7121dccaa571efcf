//! Sans-IO Kafka wire handling: length-prefixed framing, request/response headers, the mirror
//! RPC messages and the record-batch toolkit. Nothing here touches a socket or a clock; every
//! length or count read from the wire is checked against a limit before it sizes anything.

pub mod batch;
pub mod coalesce;
pub mod fetch_scan;
pub mod frame;
pub mod header;
pub mod mirror;
pub mod produce;
pub mod produce_response_scan;
pub mod records;
pub mod request;
mod response_cursor;
pub mod scan;
pub mod split;

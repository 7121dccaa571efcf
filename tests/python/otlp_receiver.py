#!/usr/bin/env python3
"""A small OTLP trace receiver for tests/otlp.rs: serves the OTLP/gRPC TraceService
(grpcio + the opentelemetry-proto generated stubs) and OTLP/HTTP protobuf (POST /v1/traces)
on loopback, and writes every span it receives as one JSON line to --out:

  {"protocol": "grpc"|"http", "resource": {...}, "scope": "...", "name": "...",
   "trace_id": hex, "span_id": hex, "parent_span_id": hex or "", "kind": int,
   "start_ns": int, "end_ns": int, "attributes": {...}, "status": {"code": int, "message": str}}

and one line per export request to --requests: {"protocol": ..., "headers": {name: value}}
(the request headers / gRPC metadata, so a test can check that configured headers were sent
while their values appear in no span). Prints `READY {"grpc": port, "http": port}` on stdout
once both servers listen; exits non-zero if either cannot start.
"""

import argparse
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

LOCK = threading.Lock()


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def record(args, protocol, request, headers):
    lines = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                lines.append(json.dumps({
                    "protocol": protocol,
                    "resource": resource,
                    "scope": ss.scope.name,
                    "name": s.name,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "kind": s.kind,
                    "start_ns": s.start_time_unix_nano,
                    "end_ns": s.end_time_unix_nano,
                    "attributes": attributes(s.attributes),
                    "status": {"code": s.status.code, "message": s.status.message},
                }))
    with LOCK:
        with open(args.out, "a") as f:
            for line in lines:
                f.write(line + "\n")
        with open(args.requests, "a") as f:
            f.write(json.dumps({"protocol": protocol, "spans": len(lines), "headers": headers}) + "\n")


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, args):
        self.args = args

    def Export(self, request, context):
        headers = {k: v for k, v in context.invocation_metadata()}
        record(self.args, "grpc", request, headers)
        return trace_service_pb2.ExportTraceServiceResponse()


def http_handler(args):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = trace_service_pb2.ExportTraceServiceRequest()
            try:
                request.ParseFromString(body)
            except Exception as e:  # noqa: BLE001 - a bad body is the sender's bug: answer 400
                self.send_error(400, str(e))
                return
            record(args, "http", request, {k.lower(): v for k, v in self.headers.items()})
            out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--requests", required=True)
    args = p.parse_args()
    open(args.out, "a").close()
    open(args.requests, "a").close()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(args), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    if grpc_port == 0:
        sys.exit("cannot bind the OTLP/gRPC port")
    server.start()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), http_handler(args))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    print("READY " + json.dumps({"grpc": grpc_port, "http": httpd.server_address[1]}), flush=True)
    # Until the test closes our stdin (or kills us).
    sys.stdin.read()
    httpd.shutdown()
    server.stop(0)


if __name__ == "__main__":
    main()

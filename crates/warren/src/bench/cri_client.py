"""A CRI client for warren's CRI test and bench: a JSON-lines bridge to a
containerd's CRI (runtime.v1) over its unix socket, with the Kubernetes project's
generated stubs (PyPI container-runtime-interface-api) and grpcio.

usage: python3 cri_client.py SOCKET   (one request a line on stdin, one answer a line
on stdout)

  {"call": "RunPodSandbox", "request": {...}}        RuntimeService (or
  {"call": "PullImage", "service": "image", ...}     ImageService)
  -> {"ok": {...response, proto field names...}, "ms": 12.3}
     (fields at their default printed too, ExecSync's stdout and stderr as
     text, not base64)
  -> {"error": {"code": "NOT_FOUND", "details": "..."}, "ms": 1.0}

  {"stream": URL, "stdin": "text", "until": "text", "timeout": 10}
  -> {"ok": {"stdout": "...", "stderr": "...", "status": {...} or null}, "ms": ...}
     speaks the streaming server's WebSocket protocol (v4.channel.k8s.io: one
     channel byte before each frame, 0 stdin, 1 stdout, 2 stderr, 3 status) for the
     URL an Exec or Attach answered; reads until the server closes, the output holds
     `until`, or `timeout` seconds pass.

"ms" is the time of the call itself (not the JSON pipe).
"""

import json
import sys
import time

import grpc
import websocket
from cri_api.v1 import api_pb2, api_pb2_grpc
from google.protobuf import json_format


def stream(msg):
    url = msg["stream"].replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    ws = websocket.create_connection(
        url, subprotocols=["v4.channel.k8s.io"], timeout=msg.get("timeout", 10)
    )
    out = {"stdout": "", "stderr": "", "status": None}
    until = msg.get("until")
    deadline = time.monotonic() + msg.get("timeout", 10)
    try:
        if msg.get("stdin"):
            ws.send_binary(b"\x00" + msg["stdin"].encode())
        while time.monotonic() < deadline:
            ws.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                frame = ws.recv()
            except websocket.WebSocketTimeoutException:
                break
            except websocket.WebSocketConnectionClosedException:
                break
            if not frame:
                break
            if isinstance(frame, str):
                frame = frame.encode()
            chan, data = frame[0], frame[1:].decode(errors="replace")
            if chan == 1:
                out["stdout"] += data
            elif chan == 2:
                out["stderr"] += data
            elif chan == 3 and data:
                out["status"] = json.loads(data)
            if until and until in out["stdout"] + out["stderr"]:
                break
    finally:
        ws.close()
    return out


def main():
    channel = grpc.insecure_channel("unix://" + sys.argv[1])
    runtime = api_pb2_grpc.RuntimeServiceStub(channel)
    image = api_pb2_grpc.ImageServiceStub(channel)
    for line in sys.stdin:
        msg = json.loads(line)
        start = time.monotonic()
        try:
            if "stream" in msg:
                answer = {"ok": stream(msg)}
            else:
                call = msg["call"]
                stub = image if msg.get("service") == "image" else runtime
                request = json_format.ParseDict(
                    msg.get("request", {}), getattr(api_pb2, call + "Request")()
                )
                response = getattr(stub, call)(request, timeout=msg.get("timeout", 120))
                out = json_format.MessageToDict(
                    response,
                    preserving_proto_field_name=True,
                    always_print_fields_with_no_presence=True,
                )
                if call == "ExecSync":  # bytes, as text rather than base64
                    out["stdout"] = response.stdout.decode(errors="replace")
                    out["stderr"] = response.stderr.decode(errors="replace")
                answer = {"ok": out}
        except grpc.RpcError as e:
            answer = {"error": {"code": e.code().name, "details": e.details()}}
        except Exception as e:  # a bad request or a stream that failed: say which
            answer = {"error": {"code": "CLIENT", "details": f"{type(e).__name__}: {e}"}}
        answer["ms"] = (time.monotonic() - start) * 1000.0
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

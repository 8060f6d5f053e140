"""The app service: counts hits in Redis, answers on :8000."""
import http.server
import json
import signal
import sys

from app import kv


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        r = kv.connect()
        if self.path == "/health":
            r.ping()
            body = {"ok": True, "version": kv.VERSION}
        else:
            body = {"hits": kv.incr(r, "hits:" + self.path), "version": kv.VERSION}
        b = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def log_message(self, *a):
        pass


if __name__ == "__main__":
    # PID 1 ignores SIGTERM without a handler: docker would wait 10 s to kill it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()

# Hostile fake collector for `geopriv outbox upload`. Usage: fake.py PORT MODE
import http.server, json, sys, time, socketserver
port, mode = int(sys.argv[1]), sys.argv[2]
log = open(f"fake-{mode}.log", "a")
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self): self.do_POST()
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n)
        recs = [l for l in body.split(b"\n") if l.strip()]
        log.write(f"{self.command} {self.path} {len(recs)} records\n"); log.flush()
        def send(status, b, hdrs=()):
            self.send_response(status)
            for k, v in hdrs: self.send_header(k, v)
            self.send_header("content-length", str(len(b)))
            self.end_headers(); self.wfile.write(b)
        k = len(recs)
        if mode == "garbage": send(200, bytes(range(256)) * 10)
        elif mode == "html": send(200, b"<html>captive portal</html>")
        elif mode == "lie-all": send(200, json.dumps({"accepted": k, "duplicates": [], "rejected": []}).encode())
        elif mode == "lie-dups": send(200, json.dumps({"accepted": 0, "duplicates": list(range(1, k+1)), "rejected": []}).encode())
        elif mode == "overcount": send(200, json.dumps({"accepted": k+1, "duplicates": [], "rejected": []}).encode())
        elif mode == "dupidx": send(200, json.dumps({"accepted": k-2, "duplicates": [1, 1], "rejected": []}).encode())
        elif mode == "zeroidx": send(200, json.dumps({"accepted": k-1, "duplicates": [0], "rejected": []}).encode())
        elif mode == "bigidx": send(200, json.dumps({"accepted": k-1, "duplicates": [2**64-1], "rejected": []}).encode())
        elif mode == "negative": send(200, json.dumps({"accepted": -1, "duplicates": [], "rejected": []}).encode())
        elif mode == "float": send(200, json.dumps({"accepted": float(k), "duplicates": [], "rejected": []}).encode())
        elif mode == "overflow": send(200, json.dumps({"accepted": 2**64-1, "duplicates": [1], "rejected": []}).encode())
        elif mode == "evil-reject":
            send(200, json.dumps({"accepted": 0, "duplicates": [], "rejected": [{"index": i+1, "code": "\x1b]0;pwn\x07\u202e", "reason": "\x1b[2J\u202egnp.exe\u2066\n" + "x"*10} for i in range(k)]}, ensure_ascii=False).encode())
        elif mode == "evil-error": send(500, json.dumps({"code": "\x1b]0;pwn\x07", "reason": "\u202e\x1b[31mred"}, ensure_ascii=False).encode())
        elif mode == "always400": send(400, b'{"code":"bad-request","reason":"proxy says no"}')
        elif mode == "always413": send(413, b'nginx: request entity too large')
        elif mode == "always401": send(401, b'{}')
        elif mode == "huge": send(200, b" " * (17 << 20) + json.dumps({"accepted": k, "duplicates": [], "rejected": []}).encode())
        elif mode == "retry-huge": send(503, b"{}", [("Retry-After", "99999999999999999999")])
        elif mode == "retry-date": send(503, b"{}", [("Retry-After", "Wed, 21 Oct 2099 07:28:00 GMT")])
        elif mode == "redirect302": send(302, b"", [("Location", "/elsewhere")]) if self.path != "/elsewhere" else send(200, json.dumps({"accepted": k, "duplicates": [], "rejected": []}).encode())
        elif mode == "redirect307": send(307, b"", [("Location", "/elsewhere")]) if self.path != "/elsewhere" else send(200, json.dumps({"accepted": k, "duplicates": [], "rejected": []}).encode())
        elif mode == "redirect-loop": send(308, b"", [("Location", self.path)])
        elif mode == "hang":
            self.send_response(200); self.send_header("content-length", "100000"); self.end_headers()
            for _ in range(200): self.wfile.write(b" "); self.wfile.flush(); time.sleep(1)
        elif mode == "status1xx": send(199, b"{}")
        elif mode == "status600": 
            self.wfile.write(b"HTTP/1.1 600 Weird\r\ncontent-length: 2\r\n\r\n{}")
        elif mode == "nolength":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + json.dumps({"accepted": k, "duplicates": [], "rejected": []}).encode()[:-5]); self.close_connection = True
        else: send(500, b"unknown mode")
class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
S(("127.0.0.1", port), H).serve_forever()

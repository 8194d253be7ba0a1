"""What both fake models (fake_llm.py, gemini/fake_gemini.py) answer alike: a JSON body, and a proxy
CONNECT refused and logged as an internet access attempt. Standard library only."""
import json
from http.server import BaseHTTPRequestHandler


class FakeApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _log(self, body, note=None):
        raise NotImplementedError  # each fake model logs its requests its own way

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_CONNECT(self):
        self._log(None, note="proxy CONNECT refused (internet access attempt)")
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.close_connection = True

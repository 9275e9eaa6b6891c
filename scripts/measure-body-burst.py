#!/usr/bin/env python3
"""Peak memory of `kcm apiserver` under N concurrent worst-shape bodies (issue 35).

    scripts/measure-body-burst.py KCM_BINARY N

Starts etcd (the machine's `etcd`) and `KCM_BINARY apiserver` on free loopback ports,
sends N concurrent POSTs of a 3 MiB pod whose `spec.tiny` holds ~393,000 `{"a":0}` (the
shape whose decoded form costs the most per byte), and prints the answers' codes, the
apiserver's RSS before, its peak (VmHWM) and its RSS 5 s after, and whether it is ready.
docs/PERFORMANCE.md's issue 35 section has its figures, before and after.
"""

import os, socket, subprocess, sys, tempfile, threading, time
kcm, n = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp()
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port
ep, peer, api = free_port(), free_port(), free_port()
etcd = subprocess.Popen(["etcd", "--data-dir", d + "/e", "--listen-client-urls", f"http://127.0.0.1:{ep}", "--advertise-client-urls", f"http://127.0.0.1:{ep}", "--listen-peer-urls", f"http://127.0.0.1:{peer}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", ep)).close(); break
    except OSError: time.sleep(0.1)
srv = subprocess.Popen([kcm, "--etcd-servers", f"http://127.0.0.1:{ep}", "apiserver", "--port", str(api)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def get(path):
    s = socket.create_connection(("127.0.0.1", api)); s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    r = b""
    while True:
        c = s.recv(65536)
        if not c: break
        r += c
    return r
for _ in range(100):
    try:
        if b" 200 " in get("/readyz")[:20]: break
    except OSError: pass
    time.sleep(0.2)
def kib(field):
    for line in open(f"/proc/{srv.pid}/status"):
        if line.startswith(field + ":"): return int(line.split()[1])
body = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"heavy"},"spec":{"containers":[{"name":"c","image":"nginx"}],"tiny":['
count = (3*1024*1024 - 64 - len(body)) // 8 + 1
body += b'{"a":0},' * count + b'{"a":0}]}}'
codes = {}
def post(i):
    s = socket.create_connection(("127.0.0.1", api), timeout=300)
    s.sendall(f"POST /api/v1/namespaces/default/pods HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
    try: s.sendall(body)
    except OSError: pass
    r = b""
    try:
        while True:
            c = s.recv(65536)
            if not c: break
            r += c
    except OSError: pass
    code = r[9:12].decode() or "none"
    codes[code] = codes.get(code, 0) + 1
before = kib("VmRSS"); t = time.time()
ts = [threading.Thread(target=post, args=(i,)) for i in range(n)]
[x.start() for x in ts]; [x.join() for x in ts]
el = time.time() - t
peak = kib("VmHWM"); time.sleep(5); after = kib("VmRSS")
ready = get("/readyz")[:15]
print(f"n={n} codes={codes} seconds={el:.1f} rss_before_MiB={before/1024:.0f} peak_MiB={peak/1024:.0f} rss_5s_after_MiB={after/1024:.0f} ready={ready!r}")
srv.kill(); etcd.kill()
import shutil; shutil.rmtree(d, ignore_errors=True)

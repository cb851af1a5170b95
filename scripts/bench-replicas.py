#!/usr/bin/env python3
"""How soon read replicas see the writer's acknowledged adds: one `myelin serve` writer and
N `serve --read-only` replicas on one store, on a local disk and on S3 (s3s-fs on loopback,
scripts/s3s-fs.sh), side by side in one run. Each add is sent to the writer; from its
acknowledgement, every replica is listed every 50 ms (and searched, so searches run
throughout) until it holds the new memory. Prints the wait's median, p99 and max per store.

    scripts/bench-replicas.py [--replicas 3] [--adds 40] [--reload-ms 200] [--bin PATH] [--json FILE]

Standard library only. MYELIN_BIN or --bin picks the binary (default target/release/myelin).
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(addr, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{addr}{path}", method=method, data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def start(binary, store, extra, env, log):
    p = subprocess.Popen([binary, "--quiet", "--store", store, "serve", "--backend", "cpu",
                          "--addr", "127.0.0.1:0"] + extra,
                         stdout=subprocess.PIPE, stderr=log, env=env, cwd=ROOT)
    line = p.stdout.readline().decode()
    if "http://" not in line:
        sys.exit(f"the server on {store} did not start (see its log)")
    return p, line.strip().split("http://", 1)[1]


def run(binary, store, replicas, adds, reload_ms, env, log):
    procs = []
    try:
        writer, waddr = start(binary, store, [], env, log)
        procs.append(writer)
        call(waddr, "POST", "/v1/memories", {"user_id": "r", "messages": [{"role": "user", "content": "first"}]})
        addrs = []
        for _ in range(replicas):
            p, a = start(binary, store, ["--read-only", "--reload-ms", str(reload_ms)], env, log)
            procs.append(p)
            addrs.append(a)
        waits = []
        for i in range(adds):
            text = f"memory {i}: the harbour lights were green on the night of the storm"
            done = call(waddr, "POST", "/v1/memories", {"user_id": "r", "messages": [{"role": "user", "content": text}]})
            mid = done["results"][0]["id"]
            acked = time.monotonic()
            pending = list(addrs)
            while pending:
                if time.monotonic() - acked > 60:
                    sys.exit(f"add {i} not visible in {len(pending)} replicas after 60 s")
                for a in list(pending):
                    call(a, "POST", "/v1/memories/search", {"user_id": "r", "query": text})
                    listed = call(a, "GET", "/v1/memories?user_id=r&limit=100000")["results"]
                    if any(m["id"] == mid for m in listed):
                        waits.append(time.monotonic() - acked)
                        pending.remove(a)
                time.sleep(0.05)
        health = [call(a, "GET", "/health")["replica"] for a in addrs]
        return sorted(waits), health
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--adds", type=int, default=40)
    ap.add_argument("--reload-ms", type=int, default=200)
    ap.add_argument("--bin", default=os.environ.get("MYELIN_BIN", os.path.join(ROOT, "target/release/myelin")))
    ap.add_argument("--json")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"no binary at {args.bin}: cargo build --release, or pass --bin")
    s3s = subprocess.run([os.path.join(ROOT, "scripts/s3s-fs.sh")], capture_output=True, text=True, check=True).stdout.strip()
    work = tempfile.mkdtemp()
    port = free_port()
    os.makedirs(os.path.join(work, "s3", "replicas"))
    server = subprocess.Popen([s3s, "--host", "127.0.0.1", "--port", str(port), "--access-key", "bench",
                               "--secret-key", "bench-secret", os.path.join(work, "s3")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench",
               AWS_SECRET_ACCESS_KEY="bench-secret", AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    rows = {}
    try:
        with open(os.path.join(work, "serve.log"), "w") as log:
            for name, store in [("local", os.path.join(work, "local-store")), ("s3", "s3://replicas/store")]:
                waits, health = run(args.bin, store, args.replicas, args.adds, args.reload_ms, env, log)
                p99 = waits[min(len(waits) - 1, -(-len(waits) * 99 // 100) - 1)]
                rows[name] = {"waits": len(waits), "median_s": waits[len(waits) // 2], "p99_s": p99,
                              "max_s": waits[-1], "replicas_behind_at_end": [h["behind"] for h in health]}
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)
    print(f"binary: {args.bin}; {args.replicas} replicas, {args.adds} adds, reload every {args.reload_ms} ms")
    print(f"{'store':<6} {'waits':>6} {'median_s':>9} {'p99_s':>7} {'max_s':>7}  behind at end")
    for name, r in rows.items():
        print(f"{name:<6} {r['waits']:>6} {r['median_s']:>9.3f} {r['p99_s']:>7.3f} {r['max_s']:>7.3f}  {r['replicas_behind_at_end']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()

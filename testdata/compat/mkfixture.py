#!/usr/bin/env python3
"""Writes a data dir with the release binary given as argv[1] into argv[2]:
a workspace transaction waiting for approval, a completed one, a denied one,
and a document at revision 1. The compat test resumes it with today's binary."""
import json, os, shutil, subprocess, sys
kernel, out = sys.argv[1], sys.argv[2]
shutil.rmtree(out, ignore_errors=True)
ws, data = os.path.join(out, "ws"), os.path.join(out, "data")
os.makedirs(ws)
open(os.path.join(ws, "README.md"), "w").write("hello\nTODO: remove me\nbye\n")
open(os.path.join(ws, "main.go"), "w").write("package main\n\nfunc main() {}\n")
p = subprocess.Popen([kernel, "serve", "--workspace", ws, "--data-dir", data, "--framing", "ndjson"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
n = 0
def call(method, params):
    global n
    n += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n")
    p.stdin.flush()
    while True:
        msg = json.loads(p.stdout.readline())
        if msg.get("id") == n:
            if "error" in msg:
                raise SystemExit(f"{method}: {msg['error']}")
            return msg["result"]
call("initialize", {})
diff = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n hello\n-TODO: remove me\n+done\n bye\n"
pending = call("turn/start", {"proposal": {"kind": "unified_diff", "diff": diff}})["transactionId"]
r = call("apply/execute", {"transactionId": pending})
assert not r["ok"], r
done = call("turn/start", {"proposal": {"kind": "files", "files": [{"path": "docs/new.txt", "content": "new file\n"}]}})["transactionId"]
r = call("apply/execute", {"transactionId": done})
call("approval/respond", {"transactionId": done, "approvalRequestId": r["pendingApprovals"][0]["approvalRequestId"], "decision": "approve"})
assert call("apply/execute", {"transactionId": done})["ok"]
denied = call("turn/start", {"proposal": {"kind": "files", "files": [{"path": "main.go", "content": "package main\n"}]}})["transactionId"]
r = call("apply/execute", {"transactionId": denied})
call("approval/respond", {"transactionId": denied, "approvalRequestId": r["pendingApprovals"][0]["approvalRequestId"], "decision": "deny"})
call("doc/create", {"docId": "pancakes", "docType": "recipe", "content": {"title": "Pancakes", "steps": [{"id": "s1", "text": "Whisk 2 eggs", "status": "done"}], "ingredients": [{"id": "i1", "text": "2 eggs"}], "notes": [], "userDefaults": {"hardAvoids": ["walnut"], "portions": 2}}})
env = {"patch_id": "p1", "expected_revision": 0, "operations": [{"op": "replace", "path": "/userDefaults/portions", "value": 4}]}
v = call("patch/validate", {"docId": "pancakes", "patch": env})
call("patch/apply", {"docId": "pancakes", "validationId": v["validationId"], "patch": env})
p.stdin.close()
p.wait()
json.dump({"release": os.path.basename(kernel), "pending": pending, "completed": done, "denied": denied},
          open(os.path.join(out, "ids.json"), "w"), indent=1)

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// runChecklist walks seed 000's flow on a closing checklist (`make
// demo-docs`): doc/create, twelve earlier patches that bring the document
// to revision 12, then the seed's own example envelope (dir/envelope.json,
// expected_revision 12): patch/validate with its preview, patch/apply, a
// replay of the same patch_id (no second effect), and an apply with a
// stale revision that is refused.
func runChecklist(kernelBin, dir string, keep bool) error {
	checklist, err := os.ReadFile(filepath.Join(dir, "checklist.json"))
	if err != nil {
		return err
	}
	envelope, err := os.ReadFile(filepath.Join(dir, "envelope.json"))
	if err != nil {
		return err
	}
	ws, err := os.MkdirTemp("", "txkernel-demo-ws-")
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "txkernel-demo-data-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(ws)
		defer os.RemoveAll(data)
	}
	k, err := startKernel(kernelBin, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "warn")
	if err != nil {
		return err
	}
	defer k.stop()
	c := k.c

	if _, err := c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "demo-host"}}); err != nil {
		return err
	}
	if err := c.notify("initialized", map[string]any{}); err != nil {
		return err
	}
	const docID = "falcon-closing"
	if _, err := c.call("doc/create", map[string]any{"docId": docID, "docType": "closing_checklist", "content": json.RawMessage(checklist)}); err != nil {
		return err
	}
	banner("doc/create: the checklist starts at revision 0", c.last)

	// Twelve earlier emails, one patch each, so that the seed's envelope
	// (expected_revision 12) meets the revision it was written for.
	fmt.Println("\nTwelve earlier patches, one per email, each validated (patch/validate) and then applied (patch/apply):")
	c.hush()
	for i := 1; i <= 12; i++ {
		env := map[string]any{
			"patch_id": fmt.Sprintf("patch_earlier_%02d", i), "expected_revision": i - 1,
			"source_event": map[string]any{"provider": "outlook", "message_id": fmt.Sprintf("earlier-%02d", i)},
			"operations": []any{map[string]any{"op": "add", "path": fmt.Sprintf("/entries_by_id/ent_annex_%02d", i),
				"value": map[string]any{"document": fmt.Sprintf("Annex %d", i), "status": "DRAFT"}}},
		}
		if _, err := applyEnvelope(c, docID, env); err != nil {
			return err
		}
	}
	fmt.Printf("  %s; the checklist is at revision 12\n", c.summary())

	val, err := c.call("patch/validate", map[string]any{"docId": docID, "patch": json.RawMessage(envelope)})
	if err != nil {
		return err
	}
	banner("patch/validate of the example email's envelope (close iss_mfn, cite the reply): the dry run, its preview and validationId", c.last)
	var v struct {
		ValidationID string `json:"validationId"`
	}
	json.Unmarshal(val, &v)
	if _, err := c.call("patch/apply", map[string]any{"validationId": v.ValidationID, "patch": json.RawMessage(envelope)}); err != nil {
		return err
	}
	banner("patch/apply: one SQL transaction, revision 12 → 13", c.last)
	if _, err := c.call("patch/apply", map[string]any{"validationId": v.ValidationID, "patch": json.RawMessage(envelope)}); err != nil {
		return err
	}
	banner("patch/apply again (a replay of the same patch_id): the original result, alreadyApplied, no second effect", c.last)
	if _, err := c.call("doc/get", map[string]any{"docId": docID}); err != nil {
		return err
	}
	banner("doc/get: iss_mfn is CLOSED with its citation", c.last)

	// The seed's envelope once more under a new patch_id: it was written
	// for revision 12, and the document is at 13.
	var stale map[string]any
	json.Unmarshal(envelope, &stale)
	stale["patch_id"] = "patch_2026_02_22_thread44_v2"
	if _, err := c.call("patch/validate", map[string]any{"docId": docID, "patch": stale}); err == nil {
		return fmt.Errorf("a stale expected_revision was accepted")
	}
	banner("patch/validate of an envelope written for revision 12: refused, the document moved on", c.last)
	if _, err := c.call("shutdown", nil); err != nil {
		return err
	}
	return c.notify("exit", nil)
}

// applyEnvelope validates env and applies it with the validationId.
func applyEnvelope(c *client, docID string, env map[string]any) (json.RawMessage, error) {
	val, err := c.call("patch/validate", map[string]any{"docId": docID, "patch": env})
	if err != nil {
		return nil, err
	}
	var v struct {
		ValidationID string `json:"validationId"`
	}
	if err := json.Unmarshal(val, &v); err != nil {
		return nil, err
	}
	return c.call("patch/apply", map[string]any{"validationId": v.ValidationID, "patch": env})
}

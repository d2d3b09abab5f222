package store

// This file is kernel.db's identity: a random id stored inside the
// database and, with its schema version, in a small fsynced file beside
// it (kernel.db.id). The file says "this data dir held a kernel.db"; when
// kernel.db has then disappeared, is empty, or is another database, the
// kernel refuses to open it instead of quietly creating a fresh, empty
// one and answering as if documents, the corpus and memory had never
// existed.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/txkernel/txkernel/errs"
)

// idSuffix names the identity file: kernel.db's path plus this suffix
// (<data-dir>/kernel.db.id).
const idSuffix = ".id"

// identityTable holds kernel.db's own copy of its id, one row. It is made
// outside the numbered migrations (CREATE TABLE IF NOT EXISTS) so that a
// database from before identities gets one without a schema step.
const identityTable = `CREATE TABLE IF NOT EXISTS kernel_identity (
	id         TEXT NOT NULL,
	created_at TEXT NOT NULL
)`

// Identity is the content of kernel.db.id: the database's id (also stored
// in its kernel_identity table), the schema version (user_version) it was
// last opened at, and when the id was made.
type Identity struct {
	ID            string `json:"id"`
	SchemaVersion int    `json:"schemaVersion"`
	CreatedAt     string `json:"createdAt"`
}

// IdentityError is the refusal to open a kernel.db that does not match
// its kernel.db.id: Path is the database, Reason one of "missing",
// "empty", "replaced" and "older-schema", and Recovery the steps an
// operator takes. Its kind is errs.Internal (data: path, reason).
type IdentityError struct {
	Path     string
	Reason   string
	Detail   string
	Recovery string
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("%s %s (%s): refusing to start on it, which would answer as if its documents, corpus and memory had never existed. %s",
		e.Path, e.Detail, e.Reason, e.Recovery)
}

// identityErr builds the refusal, as an errs.Internal carrying an
// IdentityError.
func identityErr(path, idPath, reason, detail string) error {
	ie := &IdentityError{Path: path, Reason: reason, Detail: detail,
		Recovery: fmt.Sprintf("Recovery: stop every kernel on this data dir, then restore %s (and any %s-wal beside it) from a backup; "+
			"or, to start afresh without that data (or to keep the database that is there now), move %s aside, and the next start records the database it finds.",
			path, filepath.Base(path), idPath)}
	return errs.Wrap(errs.Internal, ie, map[string]string{"path": path, "reason": reason}, "")
}

// identityPath returns the identity file of the database at path.
func identityPath(path string) string { return path + idSuffix }

// ReadIdentity reads the identity file of the database at path. ok is
// false when there is none.
func ReadIdentity(path string) (id Identity, ok bool, err error) {
	data, err := os.ReadFile(identityPath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, err
	}
	if err := json.Unmarshal(data, &id); err != nil || id.ID == "" {
		return Identity{}, false, fmt.Errorf("%s is not an identity file (%v): move it aside to record the database afresh", identityPath(path), err)
	}
	return id, true, nil
}

// CheckFile refuses, before anything creates the file, a database the
// identity file says exists that is missing or empty. It reads no more
// than the identity file and one stat.
func CheckFile(path string) error {
	id, ok, err := ReadIdentity(path)
	if err != nil || !ok {
		return err
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return identityErr(path, identityPath(path), "missing", fmt.Sprintf("has disappeared, but %s records a database (id %s, schema %d, created %s)", identityPath(path), id.ID, id.SchemaVersion, id.CreatedAt))
	case err != nil:
		return err
	case st.Size() == 0:
		return identityErr(path, identityPath(path), "empty", fmt.Sprintf("is empty, but %s records a database (id %s, schema %d, created %s)", identityPath(path), id.ID, id.SchemaVersion, id.CreatedAt))
	}
	return nil
}

// identify runs after the migrations: it compares the database's id with
// the identity file, gives a database without one an id, and (re)writes
// the identity file when it is missing or its schema version is behind.
func (s *DB) identify(ctx context.Context, path string) error {
	rec, recorded, err := ReadIdentity(path)
	if err != nil {
		return err
	}
	var schema int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&schema); err != nil {
		return fmt.Errorf("kernel.db: %w", err)
	}
	var id Identity
	err = s.tx(ctx, func(t *sql.Tx) error {
		if _, err := t.ExecContext(ctx, identityTable); err != nil {
			return err
		}
		err := t.QueryRowContext(ctx, "SELECT id, created_at FROM kernel_identity LIMIT 1").Scan(&id.ID, &id.CreatedAt)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if recorded {
			// A database with no id where one was recorded is not the
			// recorded one (a fresh file SQLite made in its place).
			return nil
		}
		var b [16]byte
		rand.Read(b[:])
		id = Identity{ID: hex.EncodeToString(b[:]), CreatedAt: time.Now().UTC().Format(time.RFC3339)}
		_, err = t.ExecContext(ctx, "INSERT INTO kernel_identity (id, created_at) VALUES (?, ?)", id.ID, id.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("kernel.db: identity: %w", err)
	}
	idPath := identityPath(path)
	switch {
	case recorded && id.ID == "":
		return identityErr(path, idPath, "replaced", fmt.Sprintf("holds no identity, but %s records database %s (schema %d, created %s): it is not that database", idPath, rec.ID, rec.SchemaVersion, rec.CreatedAt))
	case recorded && id.ID != rec.ID:
		return identityErr(path, idPath, "replaced", fmt.Sprintf("is database %s, but %s records database %s (schema %d, created %s)", id.ID, idPath, rec.ID, rec.SchemaVersion, rec.CreatedAt))
	case recorded && schema < rec.SchemaVersion:
		return identityErr(path, idPath, "older-schema", fmt.Sprintf("is at schema %d, but %s recorded it at schema %d: an older copy of it", schema, idPath, rec.SchemaVersion))
	case recorded && schema == rec.SchemaVersion:
		return nil
	}
	id.SchemaVersion = schema
	return writeIdentity(idPath, id)
}

// writeIdentity replaces the identity file durably: written to a
// temporary file, fsynced, renamed into place and the directory fsynced,
// so a crash leaves the old file or the new one, never a torn one.
func writeIdentity(idPath string, id Identity) error {
	data, err := json.Marshal(id)
	if err != nil {
		return err
	}
	tmp := idPath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("kernel.db identity: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, idPath)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(idPath)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kernel.db identity: %w", err)
	}
	return nil
}

package corpus

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
)

// The governance files of a log corpus (seed 004, "Pre-Build Gates" and
// "Sync / Ingestion"). They live in the data dir, not beside the log: the
// kernel never writes the workspace outside a transaction, and the log's
// directory may be read-only to it. corpus/status gives their paths.
const (
	collisionLogName = "collision.log"
	sectionCountName = ".section_count"
)

func (s *Service) govPath(corpusID, name string) string {
	return filepath.Join(s.cfg.DataDir, "corpus", corpusID, name)
}

// collisionLine is one line of collision.log: tab-separated canonical
// number, filed numeral, filed number, logged-at time and title. The
// format is fixed: hosts grep it.
func collisionLine(e protocol.CollisionEntry) string {
	title := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, e.Title)
	return fmt.Sprintf("%d\t%s\t%d\t%s\t%s\n", e.CanonicalSectionNumber, e.SectionNumberFiled, e.FiledNumber, e.LoggedAt, title)
}

// readCollisionLog parses collision.log; a missing log is empty. Lines it
// cannot parse (a torn last line after a crash) are skipped.
func (s *Service) readCollisionLog(corpusID string) ([]protocol.CollisionEntry, error) {
	data, err := os.ReadFile(s.govPath(corpusID, collisionLogName))
	if os.IsNotExist(err) {
		return []protocol.CollisionEntry{}, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "read collision.log")
	}
	out := []protocol.CollisionEntry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 5)
		if len(f) != 5 {
			continue
		}
		canonical, err1 := strconv.Atoi(f[0])
		filed, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, protocol.CollisionEntry{CanonicalSectionNumber: canonical, SectionNumberFiled: f[1], FiledNumber: filed, LoggedAt: f[3], Title: f[4]})
	}
	return out, nil
}

// appendCollisions appends to collision.log the collisions it does not
// hold yet (by canonical number and filed numeral) and fsyncs it, before
// the sync's SQL commit: a crash in between appends nothing twice, since
// the log itself is the record of what was appended. The log is
// append-only and never corrected (seed 004).
func (s *Service) appendCollisions(corpusID string, cs []protocol.CollisionEntry) ([]protocol.CollisionEntry, error) {
	fresh := []protocol.CollisionEntry{}
	if len(cs) == 0 {
		return fresh, nil
	}
	have, err := s.readCollisionLog(corpusID)
	if err != nil {
		return nil, err
	}
	logged := map[string]bool{}
	for _, e := range have {
		logged[strconv.Itoa(e.CanonicalSectionNumber)+"\x00"+e.SectionNumberFiled] = true
	}
	var buf strings.Builder
	at := time.Now().UTC().Format(time.RFC3339)
	for _, e := range cs {
		if logged[strconv.Itoa(e.CanonicalSectionNumber)+"\x00"+e.SectionNumberFiled] {
			continue
		}
		e.LoggedAt = at
		fresh = append(fresh, e)
		buf.WriteString(collisionLine(e))
	}
	if len(fresh) == 0 {
		return fresh, nil
	}
	p := s.govPath(corpusID, collisionLogName)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "collision.log")
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "collision.log")
	}
	defer f.Close()
	if _, err := f.WriteString(buf.String()); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "collision.log")
	}
	if err := f.Sync(); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "collision.log")
	}
	return fresh, nil
}

// writeSectionCount writes n to .section_count under an exclusive flock,
// as the seed's writers do ("any writer reads before appending; increments
// after writing section"): a reader holding a shared flock never sees a
// half-written number.
func (s *Service) writeSectionCount(corpusID string, n int) error {
	p := s.govPath(corpusID, sectionCountName)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count: flock")
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := f.Truncate(0); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(n)+"\n"), 0); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	return f.Sync()
}

// ReadSectionCount reads a .section_count file under a shared flock.
func ReadSectionCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return 0, err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	return strconv.Atoi(strings.TrimSpace(string(b[:n])))
}

// Collisions returns a log's current collisions and every line of its
// collision.log (corpus/collisions).
func (s *Service) Collisions(ctx context.Context, id string) (*protocol.CorpusCollisions, error) {
	db, c, _, err := s.corpus(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := db.Collisions(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	out := &protocol.CorpusCollisions{CorpusID: c.ID, Collisions: []protocol.CollisionEntry{}}
	for _, r := range rows {
		v, _ := markdown.RomanValue(r.Filed)
		out.Collisions = append(out.Collisions, protocol.CollisionEntry{CanonicalSectionNumber: r.Canonical, SectionNumberFiled: r.Filed,
			FiledNumber: v, Title: r.Title})
	}
	if out.Log, err = s.readCollisionLog(c.ID); err != nil {
		return nil, err
	}
	return out, nil
}

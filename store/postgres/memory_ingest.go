package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Writing versions and their chunks, set-based: an ingest of a backlog
// is a few round trips whatever its size (the new elements and the
// versions in one batch, the heads, the chunks and their posting lists in
// another, each row set one statement over parameter arrays), not a few
// round trips per file. Ingest writes what the SQLite store's Ingest
// writes, file by file in order.

// Ingest implements memory.Store (store.MemoryStore.Ingest): one SQL
// transaction under the scope's lock. A file the server refuses (a name
// that is not UTF-8, a path or body over one of PostgreSQL's limits:
// refusedFile) is skipped (memory.IngestSkipped with the reason), the
// others are written: the batch is written again file by file, each
// under a savepoint, only when one is refused. A file whose body hash is that of
// its element's newest ingested version is unchanged; a file of an
// element that is not a backlog document fails the whole ingest
// (memory.ErrIngestType).
func (m *Memory) Ingest(ctx context.Context, scope protocol.MemoryScope, files []memory.IngestFile) ([]memory.IngestOutcome, error) {
	var out []memory.IngestOutcome
	ts := now()
	err := m.write(ctx, scope, func(tx pgx.Tx) error {
		var err error
		sp, err := tx.Begin(ctx) // a savepoint: a refused file must not end the transaction
		if err != nil {
			return internal(err, "savepoint")
		}
		out, err = ingest(ctx, sp, scope, files, ts)
		if err == nil {
			return nil // the commit releases the savepoint: no round trip for it
		}
		if _, ok := refusedFile(err); !ok || len(files) == 1 {
			_ = sp.Rollback(ctx)
			if reason, ok := refusedFile(err); ok {
				out = []memory.IngestOutcome{{ElementID: files[0].ElementID, Status: memory.IngestSkipped, Reason: reason}}
				return nil
			}
			return err
		}
		// One file the server refuses (refusedFile) fails the batch's
		// set-based statements: write the batch again file by file, each
		// under its own savepoint, and skip only the files refused.
		if err := sp.Rollback(ctx); err != nil {
			return internal(err, "roll back to savepoint")
		}
		out = out[:0]
		for _, f := range files {
			one, err := tx.Begin(ctx)
			if err != nil {
				return internal(err, "savepoint")
			}
			res, err := ingest(ctx, one, scope, []memory.IngestFile{f}, ts)
			if reason, refused := refusedFile(err); refused {
				if err := one.Rollback(ctx); err != nil {
					return internal(err, "roll back to savepoint")
				}
				out = append(out, memory.IngestOutcome{ElementID: f.ElementID, Status: memory.IngestSkipped, Reason: reason})
				continue
			}
			if err != nil {
				return err
			}
			if err := one.Commit(ctx); err != nil {
				return internal(err, "release savepoint")
			}
			out = append(out, res...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// refusedFile reports an error the server gives for one file's data, not
// for the request: a name that is not UTF-8 (22021, 22P05), a value
// over a limit (54000: a tsvector over 1 MiB, an index row over a page;
// 22001 a string too long), and the reason ingest reports it under.
func refusedFile(err error) (string, bool) {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return "", false
	}
	switch pe.Code {
	case "22021", "22P05":
		return "not-utf8-name", true
	case "54000", "22001":
		if strings.Contains(pe.Message, "tsvector") {
			return "too-large-to-index", true
		}
		return "too-long-for-store", true
	}
	return "", false
}

// ingestState is what an ingest knows of one element: its row (eid 0
// while it is still to be inserted), its newest ingested version and its
// newest sequence number, updated as the files of the call go by.
type ingestState struct {
	eid      int64
	typ      string
	lastID   string
	lastHash string
	seq      int64
	headVID  int64  // the current version (0: none yet)
	headID   string // its version id
	headKind string // its source_kind: CURATED keeps it current (memory.Store.Ingest)
}

func ingest(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, files []memory.IngestFile, ts string) ([]memory.IngestOutcome, error) {
	ids := make([]string, len(files))
	for i, f := range files {
		ids[i] = f.ElementID
	}
	// Ingest takes turns with accepts as accepts do with each other: a
	// file whose element a live claim holds waits (the caller retries),
	// so an accept never overwrites evidence newer than its base.
	if err := refuseClaimed(ctx, tx, scope, ids...); err != nil {
		return nil, err
	}
	state, err := ingestStates(ctx, tx, scope, ids)
	if err != nil {
		return nil, err
	}
	out := make([]memory.IngestOutcome, 0, len(files))
	var created []string
	var versions []versionIn
	var owners []*ingestState // owners[i] is versions[i]'s element
	type review struct {
		st *ingestState
		p  memory.NewProposal
	}
	var reviews []review
	for _, f := range files {
		st, ok := state[f.ElementID]
		status := memory.IngestNewVersion
		keepHead := false
		switch {
		case !ok:
			st = &ingestState{typ: protocol.ElementBacklogMD}
			state[f.ElementID] = st
			created = append(created, f.ElementID)
			status = memory.IngestCreated
		case st.typ != protocol.ElementBacklogMD:
			return nil, memory.ErrIngestType(f.ElementID, st.typ)
		case st.lastHash == f.Version.BodyHash:
			out = append(out, memory.IngestOutcome{ElementID: f.ElementID, Status: memory.IngestUnchanged, VersionID: st.lastID})
			continue
		case st.headKind == protocol.SourceCurated:
			// Ingest never replaces curated truth: recorded, not current.
			status, keepHead = memory.IngestForReview, true
		}
		st.seq++
		st.lastID, st.lastHash = f.Version.VersionID, f.Version.BodyHash
		versions = append(versions, versionIn{eid: st.eid, elementID: f.ElementID, seq: st.seq, v: f.Version, keepHead: keepHead})
		owners = append(owners, st)
		o := memory.IngestOutcome{ElementID: f.ElementID, Status: status, VersionID: f.Version.VersionID}
		if keepHead && f.Review.ProposalID != "" {
			reviews = append(reviews, review{st: st, p: f.ReviewTarget(scope, st.headID)})
			o.ProposalID = f.Review.ProposalID
		}
		out = append(out, o)
	}
	for i, st := range owners {
		versions[i].eid = st.eid // 0 for an element created here: insertVersions writes it
	}
	ne := &newElements{ids: created}
	if _, err := insertVersions(ctx, tx, scope, versions, ts, ne); err != nil {
		return nil, err
	}
	for id, eid := range ne.eids {
		state[id].eid = eid
	}
	for _, r := range reviews {
		if err := writeProposal(ctx, tx, r.p, &element{eid: r.st.eid, typ: r.st.typ}, r.st.headVID, ts); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ingestStates reads the elements ids name in scope, with their newest
// ingested version and their newest sequence number.
func ingestStates(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, ids []string) (map[string]*ingestState, error) {
	rows, err := tx.Query(ctx, `SELECT e.element_id, e.eid, e.type, COALESCE(l.version_id, ''), COALESCE(l.body_hash, ''),
			(SELECT COALESCE(max(seq), 0) FROM mem_versions WHERE eid = e.eid),
			COALESCE(hv.vid, 0), COALESCE(hv.version_id, ''), COALESCE(hv.source_kind, '')
		FROM mem_elements e
		LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
		LEFT JOIN LATERAL (SELECT version_id, body_hash FROM mem_versions
			WHERE eid = e.eid AND source_kind = $5 ORDER BY seq DESC LIMIT 1) l ON true
		WHERE e.tenant_id = $1 AND e.organization_id = $2 AND e.repository_id = $3 AND e.element_id = ANY($4)`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, ids, protocol.SourceIngestedEvidence)
	if err != nil {
		return nil, internal(err, "read elements")
	}
	defer rows.Close()
	state := make(map[string]*ingestState, len(ids))
	for rows.Next() {
		var id string
		var st ingestState
		if err := rows.Scan(&id, &st.eid, &st.typ, &st.lastID, &st.lastHash, &st.seq, &st.headVID, &st.headID, &st.headKind); err != nil {
			return nil, internal(err, "read elements")
		}
		state[id] = &st
	}
	return state, internalIf(rows.Err(), "read elements")
}

// versionIn is a version to write: its element, its sequence number
// within the element, and the version.
type versionIn struct {
	eid       int64 // 0: the element elementID, which newElements creates
	elementID string
	seq       int64
	v         memory.NewVersion
	keepHead  bool // recorded without becoming its element's head
}

// insertVersion writes v as eid's next version, makes it the head and
// indexes its chunks (insertVersions).
func insertVersion(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, eid int64, v memory.NewVersion, ts string) (int64, error) {
	var seq int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) + 1 FROM mem_versions WHERE eid = $1`, eid).Scan(&seq); err != nil {
		return 0, internal(err, "read sequence")
	}
	vids, err := insertVersions(ctx, tx, scope, []versionIn{{eid: eid, seq: seq, v: v}}, ts, nil)
	if err != nil {
		return 0, err
	}
	return vids[0], nil
}

// newElements are the backlog documents an ingest creates (ids, in
// order), written by insertVersions' first round trip, which fills eids.
type newElements struct {
	ids  []string
	eids map[string]int64
}

// insertVersions writes ne's elements, if any, and vs in one statement,
// in order, moves each element's head to its last version in vs, and
// indexes the versions' chunks under scope (queueChunks), whose lexemes a
// goroutine computes meanwhile (lexAsync): two round trips whatever the
// number of versions. It returns the versions' vids, in the order of vs.
func insertVersions(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, vs []versionIn, ts string, ne *newElements) ([]int64, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	// The lexemes are computed while the server writes the versions.
	lex := lexAsync(vs)
	n := len(vs)
	var (
		ids, titles, bodies, hashes, kinds, provs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		eids, seqs                                = make([]int64, n), make([]int64, n)
		elementIDs                                = make([]string, n)
		txIDs                                     = make([]*string, n)
	)
	for i, x := range vs {
		v := x.v
		prov := v.Provenance
		if len(prov) == 0 {
			prov = json.RawMessage("{}")
		}
		ids[i], titles[i], bodies[i], hashes[i], kinds[i], provs[i] = v.VersionID, v.Title, v.Body, v.BodyHash, v.SourceKind, string(prov)
		eids[i], seqs[i], elementIDs[i] = x.eid, x.seq, x.elementID
		if v.TxID != "" {
			txIDs[i] = &vs[i].v.TxID
		}
	}
	nChunks := 0
	for _, x := range vs {
		nChunks += len(x.v.Chunks)
	}
	// One round trip writes the new elements and the versions (a version
	// of a new element finds it by its id), and reserves the chunks' ids.
	var batch pgx.Batch
	if ne != nil && len(ne.ids) > 0 {
		batch.Queue(`INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at)
			SELECT $1, $2, $3, id, $5, $6, $7 FROM unnest($4::text[]) WITH ORDINALITY AS u(id, n) ORDER BY n
			RETURNING eid, element_id`,
			scope.TenantID, scope.OrganizationID, scope.RepositoryID, ne.ids, protocol.ElementBacklogMD, protocol.SourceIngestedEvidence, ts)
	}
	batch.Queue(`INSERT INTO mem_versions (tenant_id, version_id, eid, seq, title, body, body_hash, source_kind, created_at, provenance, tx_id)
		SELECT $1, u.id,
			CASE WHEN u.eid <> 0 THEN u.eid ELSE (SELECT e.eid FROM mem_elements e
				WHERE e.tenant_id = $1 AND e.organization_id = $12 AND e.repository_id = $13 AND e.element_id = u.element) END,
			u.seq, u.title, u.body, u.hash, u.kind, $2, u.prov, u.tx
		FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $14::text[])
			WITH ORDINALITY AS u(id, eid, seq, title, body, hash, kind, prov, tx, element, n)
		ORDER BY u.n
		RETURNING vid, version_id`,
		scope.TenantID, ts, ids, eids, seqs, titles, bodies, hashes, kinds, provs, txIDs, scope.OrganizationID, scope.RepositoryID, elementIDs)
	if nChunks > 0 {
		batch.Queue(`SELECT nextval(pg_get_serial_sequence('mem_chunks', 'id')) FROM generate_series(1, $1)`, nChunks)
	}
	br := tx.SendBatch(ctx, &batch)
	if ne != nil && len(ne.ids) > 0 {
		ne.eids = make(map[string]int64, len(ne.ids))
		err := scanAll(br, func(r pgx.Rows) error {
			var eid int64
			var id string
			err := r.Scan(&eid, &id)
			ne.eids[id] = eid
			return err
		})
		if err != nil {
			br.Close()
			return nil, internal(err, "insert elements")
		}
		for i := range vs {
			if vs[i].eid == 0 {
				if vs[i].eid = ne.eids[vs[i].elementID]; vs[i].eid == 0 {
					br.Close()
					return nil, internal(errors.New("an element was not returned by its insert"), "insert elements")
				}
			}
		}
	}
	byID := make(map[string]int64, n)
	err := scanAll(br, func(r pgx.Rows) error {
		var vid int64
		var id string
		err := r.Scan(&vid, &id)
		byID[id] = vid
		return err
	})
	if err != nil {
		br.Close()
		return nil, internal(err, "insert versions")
	}
	chunkIDs := make([]int64, 0, nChunks)
	if nChunks > 0 {
		err = scanAll(br, func(r pgx.Rows) error {
			var id int64
			err := r.Scan(&id)
			chunkIDs = append(chunkIDs, id)
			return err
		})
	}
	if err := errors.Join(err, br.Close()); err != nil {
		return nil, internal(err, "reserve chunk ids")
	}
	if len(chunkIDs) != nChunks {
		return nil, internal(errors.New("the sequence gave fewer ids than chunks"), "reserve chunk ids")
	}
	slices.Sort(chunkIDs)
	vids := make([]int64, n)
	head := make(map[int64]int64, n)
	chunks := make([]chunkIn, 0, nChunks)
	for i, x := range vs {
		vid, ok := byID[x.v.VersionID]
		if !ok {
			return nil, internal(errors.New("a version was not returned by its insert"), "insert versions")
		}
		vids[i] = vid
		if !x.keepHead {
			head[x.eid] = vid
		}
		for _, c := range x.v.Chunks {
			chunks = append(chunks, chunkIn{id: chunkIDs[len(chunks)], vid: vid, c: c})
		}
	}
	heads, headVIDs := make([]int64, 0, len(head)), make([]int64, 0, len(head))
	for eid, vid := range head {
		heads, headVIDs = append(heads, eid), append(headVIDs, vid)
	}
	// A second round trip moves the heads and writes the chunks and
	// their posting lists.
	batch = pgx.Batch{}
	batch.Queue(`UPDATE mem_elements e SET head_vid = u.vid FROM unnest($1::bigint[], $2::bigint[]) AS u(eid, vid) WHERE e.eid = u.eid`,
		heads, headVIDs)
	if err := queueChunks(&batch, scope, chunks, lex); err != nil {
		return nil, err
	}
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return nil, internal(err, "write chunks")
	}
	return vids, nil
}

// scanAll reads the next result of br, calling fn for each row.
func scanAll(br pgx.BatchResults, fn func(pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// chunkIn is a chunk to index, its id (reserved from mem_chunks'
// sequence) and its version.
type chunkIn struct {
	id, vid int64
	c       memory.Chunk
}

// queueChunks queues on b the statements that index chunks under scope:
// the chunks in one INSERT, and their lexemes (lex, computed in the order
// of chunks) gathered into one posting list per lexeme (at most
// maxPostings chunks a list) in another. The lists cross as flat arrays
// of chunk ids and counts that each list slices by its bounds: neither
// COPY (which cannot write a table under row-level security, so it would
// need staging tables and more round trips) nor one parameter per list.
func queueChunks(b *pgx.Batch, scope protocol.MemoryScope, chunks []chunkIn, lex *lexing) error {
	if len(chunks) == 0 {
		return nil
	}
	terms, err := lex.wait()
	if err != nil {
		return internal(err, "index chunks")
	}
	if len(terms) != len(chunks) {
		return internal(errors.New("the lexemes are not those of the chunks"), "index chunks")
	}
	n := len(chunks)
	var (
		ids, vids      = make([]int64, n), make([]int64, n)
		keys, headings = make([]string, n), make([]string, n)
		starts, ends   = make([]int32, n), make([]int32, n)
	)
	for i, c := range chunks {
		ids[i], vids[i], keys[i], headings[i], starts[i], ends[i] = c.id, c.vid, c.c.Key, c.c.HeadingPath, int32(c.c.Start), int32(c.c.End)
	}
	lists, lengths := postingLists(terms, ids)
	b.Queue(`INSERT INTO mem_chunks (id, tenant_id, organization_id, repository_id, vid, chunk_key, heading_path, start_offset, end_offset, search_length)
		OVERRIDING SYSTEM VALUE
		SELECT u.id, $1, $2, $3, u.vid, u.chunk_key, u.heading_path, u.start_offset, u.end_offset, u.length
		FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::integer[], $9::integer[], $10::integer[])
			AS u(id, vid, chunk_key, heading_path, start_offset, end_offset, length)`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, ids, vids, keys, headings, starts, ends, lengths)
	b.Queue(`INSERT INTO mem_postings (tenant_id, sid, lexeme, chunk_ids, tf_title, tf_body)
		SELECT $1, $2, l.lexeme, ($6::bigint[])[l.lo:l.hi], ($7::integer[])[l.lo:l.hi], ($8::integer[])[l.lo:l.hi]
		FROM unnest($3::text[], $4::integer[], $5::integer[]) AS l(lexeme, lo, hi)`,
		append([]any{scope.TenantID, scopeID(scope)}, lists.args()...)...)
	return nil
}

// postings are posting lists, flat: list i is lexeme[i]'s chunks
// chunk[lo[i]-1 : hi[i]] (1-based bounds, as SQL slices them), ids
// ascending, with each chunk's counts in its title and its text.
type postings struct {
	lexeme          []string
	lo, hi          []int32
	chunk           []int64
	tfTitle, tfBody []int32
}

// args are the lists as the parameters $3..$8 of queueChunks' statement.
func (p postings) args() []any {
	return []any{p.lexeme, p.lo, p.hi, p.chunk, p.tfTitle, p.tfBody}
}

// postingLists gathers the lexemes of chunks (terms[i] is the chunk
// whose id is ids[i]) into posting lists, in order of each lexeme's first
// occurrence, and returns each chunk's length in lexemes.
func postingLists(terms []chunkTerms, ids []int64) (postings, []int32) {
	type list struct {
		lexeme string
		at     []int32 // (chunk index, title count, text count) triples
	}
	var vocabulary int32 // ids are the lexer's, below this bound
	for _, ct := range terms {
		for _, id := range ct.ids {
			vocabulary = max(vocabulary, id+1)
		}
	}
	at := make([]int32, vocabulary) // a lexeme id's open list, plus 1
	var lists []list
	lengths := make([]int32, len(terms))
	total := 0
	for i, ct := range terms {
		lengths[i] = ct.length
		total += len(ct.lexemes)
		for j, id := range ct.ids {
			k := at[id] - 1
			if k < 0 || len(lists[k].at) == 3*maxPostings {
				k = int32(len(lists))
				at[id] = k + 1
				lists = append(lists, list{lexeme: ct.lexemes[j]})
			}
			lists[k].at = append(lists[k].at, int32(i), ct.tf[j][0], ct.tf[j][1])
		}
	}
	p := postings{
		lexeme: make([]string, len(lists)), lo: make([]int32, len(lists)), hi: make([]int32, len(lists)),
		chunk: make([]int64, 0, total), tfTitle: make([]int32, 0, total), tfBody: make([]int32, 0, total),
	}
	for i, l := range lists {
		p.lexeme[i] = l.lexeme
		p.lo[i] = int32(len(p.chunk) + 1)
		for j := 0; j < len(l.at); j += 3 {
			p.chunk = append(p.chunk, ids[l.at[j]])
			p.tfTitle = append(p.tfTitle, l.at[j+1])
			p.tfBody = append(p.tfBody, l.at[j+2])
		}
		p.hi[i] = int32(len(p.chunk))
	}
	return p, lengths
}

// lexing is the lexemes of some versions' chunks, in order, computed by
// a goroutine (lexAsync) while the server works.
type lexing struct {
	done  chan struct{}
	terms []chunkTerms
	err   error // a panic of the stemmer, which must not end the kernel
}

// lexAsync starts computing the lexemes of vs's chunks. The goroutine
// ends on its own, whatever becomes of the transaction, and shares
// nothing with the caller but the chunks, which nobody writes.
func lexAsync(vs []versionIn) *lexing {
	l := &lexing{done: make(chan struct{})}
	// The goroutine reads only these (the caller goes on writing vs).
	chunks := make([][]memory.Chunk, len(vs))
	for i, x := range vs {
		chunks[i] = x.v.Chunks
	}
	go func() {
		defer close(l.done)
		defer func() {
			if r := recover(); r != nil {
				l.err = fmt.Errorf("lexing the chunks: %v", r)
			}
		}()
		lx := getLexer()
		defer putLexer(lx)
		for _, cs := range chunks {
			for _, c := range cs {
				l.terms = append(l.terms, lx.chunk(c.Title, c.Text))
			}
		}
	}()
	return l
}

// wait returns the lexemes once computed.
func (l *lexing) wait() ([]chunkTerms, error) {
	<-l.done
	return l.terms, l.err
}

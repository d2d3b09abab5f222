package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/search"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
)

// evalCmd is `txkernel eval beir`: index a BEIR corpus with the corpus
// service, run every query of the qrels, write a TREC run file and print
// nDCG@10 and recall@100 per mode (seed 004; README "Retrieval quality").
// It never destroys what it did not make: a run file that is also an input,
// or an existing file that is not a TREC run, is refused before anything
// is read (unless --force for the latter), and --data-dir takes the data
// dir's lock, so a serving kernel's data dir is refused.
func evalCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "beir" {
		fmt.Fprintln(stderr, "usage: txkernel eval beir --corpus corpus.jsonl --queries queries.jsonl --qrels qrels.tsv --run OUT [--mode keyword|semantic|hybrid|all]")
		return 2
	}
	fs := flag.NewFlagSet("eval beir", flag.ContinueOnError)
	fs.SetOutput(stderr)
	corpusPath := fs.String("corpus", "", "BEIR corpus.jsonl (required)")
	queriesPath := fs.String("queries", "", "BEIR queries.jsonl (required)")
	qrelsPath := fs.String("qrels", "", "BEIR qrels TSV (required)")
	runPath := fs.String("run", "", "TREC run file to write (required; with --mode all, one file per mode: OUT.<mode>)")
	mode := fs.String("mode", "hybrid", "keyword | semantic | hybrid | all")
	dataDir := fs.String("data-dir", "", "where kernel.db is built (default: a temporary directory, removed at the end); refused while a kernel serves it")
	force := fs.Bool("force", false, "replace an existing --run file that is not a TREC run")
	t := search.DefaultTuning
	fs.StringVar(&t.Fusion, "fusion", t.Fusion, "hybrid fusion: rrf (weighted reciprocal rank fusion) or convex (min-max normalised scores)")
	fs.Float64Var(&t.SemanticWeight, "semantic-weight", t.SemanticWeight, "RRF weight of the semantic ranking (keyword: --keyword-weight)")
	fs.Float64Var(&t.KeywordWeight, "keyword-weight", t.KeywordWeight, "RRF weight of the keyword ranking")
	fs.Float64Var(&t.Alpha, "alpha", t.Alpha, "convex fusion: the keyword share, 0..1")
	fs.Float64Var(&t.TitleWeight, "title-weight", t.TitleWeight, "BM25 weight of the title column (body: 1)")
	fs.IntVar(&t.Depth, "depth", t.Depth, "hits of each ranking fused")
	fs.IntVar(&t.PRFDocs, "prf-docs", t.PRFDocs, "hybrid: dense pseudo-relevance feedback from this many top keyword hits (0: none)")
	fs.Float64Var(&t.PRFWeight, "prf-weight", t.PRFWeight, "hybrid: weight of the feedback documents' mean vector")
	var ef embedFlags
	ef.register(fs)
	if status, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return status
	}
	if t.Fusion != search.FusionRRF && t.Fusion != search.FusionConvex || t.Alpha < 0 || t.Alpha > 1 || t.Depth < 1 {
		fmt.Fprintln(stderr, "txkernel eval beir: --fusion must be rrf or convex, --alpha within 0..1, --depth at least 1")
		return 2
	}
	if *corpusPath == "" || *queriesPath == "" || *qrelsPath == "" || *runPath == "" {
		fmt.Fprintln(stderr, "txkernel eval beir: --corpus, --queries, --qrels and --run are required")
		return 2
	}
	modes := []string{*mode}
	if *mode == "all" {
		modes = []string{"keyword", "semantic", "hybrid"}
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "txkernel eval beir: %v\n", err)
		return 1
	}
	outs := make([]string, len(modes))
	for i, m := range modes {
		outs[i] = *runPath
		if len(modes) > 1 {
			outs[i] = *runPath + "." + m
		}
		if err := checkRunOutput(outs[i], *force, *corpusPath, *queriesPath, *qrelsPath); err != nil {
			fmt.Fprintf(stderr, "txkernel eval beir: %v\n", err)
			return 2
		}
	}
	ctx := context.Background()
	docs, err := corpus.ReadBEIRDocs(*corpusPath)
	if err != nil {
		return fail(err)
	}
	queries, err := corpus.ReadBEIRQueries(*queriesPath)
	if err != nil {
		return fail(err)
	}
	qrels, err := corpus.ReadQrels(*qrelsPath)
	if err != nil {
		return fail(err)
	}
	dd := *dataDir
	if dd == "" {
		if dd, err = os.MkdirTemp("", "txkernel-eval-"); err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dd)
	} else {
		if err := os.MkdirAll(dd, 0o700); err != nil {
			return fail(err)
		}
		release, err := tx.LockDataDir(dd)
		if err != nil {
			return fail(err)
		}
		defer release()
	}
	db, err := store.Open(ctx, filepath.Join(dd, store.FileName))
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	emb, err := ef.embedder(os.Getenv)
	if err != nil {
		return fail(err)
	}
	svc := corpus.NewService(corpus.Config{DB: func(context.Context) (*store.DB, error) { return db, nil }, DataDir: dd, Embedder: emb})
	defer svc.Close()
	start := time.Now()
	id, err := svc.IndexDocuments(ctx, filepath.Base(filepath.Dir(*corpusPath)), docs)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "indexed %d documents in %.2f s\n", len(docs), time.Since(start).Seconds())
	for i, m := range modes {
		out := outs[i]
		f, err := os.Create(out)
		if err != nil {
			return fail(err)
		}
		start := time.Now()
		res, err := svc.Evaluate(ctx, id, m, queries, qrels, t, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%-8s queries=%d nDCG@10=%.4f recall@100=%.4f (%.1f ms/query) run=%s\n", m, res.Queries, res.NDCG10, res.Recall100,
			float64(time.Since(start).Milliseconds())/float64(res.Queries), out)
	}
	return 0
}

// checkRunOutput refuses a run file path that would destroy something eval
// did not make: the same file as one of inputs (the qrels it is reading,
// for instance), or, unless force, an existing file that is not a TREC run
// (its first line is not "qid Q0 docid rank score tag").
func checkRunOutput(out string, force bool, inputs ...string) error {
	fi, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, in := range inputs {
		if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
			return fmt.Errorf("--run %s is the input %s: refusing to overwrite what is being read", out, in)
		}
	}
	if force {
		return nil
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--run %s is not a regular file", out)
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) != 6 || fields[1] != "Q0" {
			return fmt.Errorf("--run %s exists and is not a TREC run file: refusing to replace it (move it away or pass --force)", out)
		}
	}
	return nil
}

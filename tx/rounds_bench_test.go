package tx

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTurnStartRounds measures the I/O of turn/start's durable write
// in the two orders RELIABILITY.md §10 has had, alternately in one loop so
// that both see the same disk: two rounds (the proposal's files, its
// directory and active/; then, after the rename into place,
// transactions/) and one (transactions/ in the same round, for the .tmp-
// name; the rename is made durable with the transaction's next append,
// which is not timed here). The files are those of a small proposal, 2
// KB each. It is the I/O alone, as BenchmarkHostSessionBuckets' promise
// floor is; sync(2) runs between iterations, untimed, as the main job's
// benchmark does between transactions. It reports each order's p50.
func BenchmarkTurnStartRounds(b *testing.B) {
	root := b.TempDir()
	txRoot, active := filepath.Join(root, TxDir), filepath.Join(root, ActiveDir)
	for _, d := range []string{txRoot, active} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 2<<10)
	var times [2][]time.Duration // by rounds-1
	i := 0
	for b.Loop() {
		one := i%2 == 1
		id := fmt.Sprintf("tx-%08d", i)
		i++
		start := time.Now()
		if err := proposalRounds(txRoot, active, id, data, one); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.StopTimer()
		if one {
			times[0] = append(times[0], d)
		} else {
			times[1] = append(times[1], d)
		}
		syscall.Sync()
		b.StartTimer()
	}
	for k, name := range []string{"one-round-p50-ns", "two-rounds-p50-ns"} {
		if len(times[k]) > 0 {
			slices.Sort(times[k])
			b.ReportMetric(float64(times[k][len(times[k])/2].Nanoseconds()), name)
		}
	}
}

// proposalRounds is the write of one proposal's directory under txRoot in
// one round of fsyncs (one) or two, as BenchmarkTurnStartRounds times it.
func proposalRounds(txRoot, active, id string, data []byte, one bool) error {
	tmp := filepath.Join(txRoot, ".tmp-"+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	names := []string{LedgerFile, patchFile, BlobFile, MetaFile}
	files := make([]*os.File, len(names))
	for k, n := range names {
		f, err := os.OpenFile(filepath.Join(tmp, n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		files[k] = f
	}
	if err := touch(filepath.Join(active, id)); err != nil {
		return err
	}
	jobs := []func() error{func() error { return syncDir(tmp) }, func() error { return syncDir(active) }}
	for k, f := range files {
		jobs = append(jobs, func() error {
			if _, err := f.Write(data); err != nil || k == len(files)-1 { // transaction.json is not fsynced
				return err
			}
			return f.Sync()
		})
	}
	if one {
		jobs = append(jobs, func() error { return syncDir(txRoot) })
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for k, job := range jobs {
		wg.Go(func() { errs[k] = job() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, filepath.Join(txRoot, id)); err != nil {
		return err
	}
	if one {
		return nil
	}
	return syncDir(txRoot)
}

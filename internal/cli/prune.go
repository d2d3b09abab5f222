package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/txkernel/txkernel/tx"
)

// defaultPruneAge is prune's --older-than when it is not given: a month of
// terminal history is kept.
const defaultPruneAge = 30 * 24 * time.Hour

// prune is `txkernel prune --data-dir D [--older-than AGE] [--dry-run]`:
// it removes terminal transactions whose last state change is older than
// AGE (30d by default; units in ageUnits), printing each id it removed,
// or with --dry-run each id it would remove, removing nothing. Exit
// status: 0 on success, 1 when a kernel holds the data dir or an I/O
// error stops it, 2 on a usage error.
func prune(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "the kernel's data directory (required)")
	olderThan := age(defaultPruneAge)
	fs.Var(&olderThan, "older-than", "remove terminal transactions whose last state change is older than `AGE`: a whole number and a unit, "+ageChoices)
	dryRun := fs.Bool("dry-run", false, "print what would be removed and remove nothing")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if *dataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: txkernel prune --data-dir DIR [--older-than AGE] [--dry-run]   (AGE: "+ageChoices+"; default 30d)")
		return 2
	}
	pruneFn, verb := tx.Prune, "removed"
	if *dryRun {
		pruneFn, verb = tx.PruneDryRun, "would remove"
	}
	res, err := pruneFn(context.Background(), *dataDir, time.Now().Add(-time.Duration(olderThan)))
	if res != nil {
		for _, id := range res.Removed {
			fmt.Fprintln(stdout, verb, id)
		}
	}
	if err != nil {
		if errors.Is(err, tx.ErrDataDirLocked) {
			fmt.Fprintf(stderr, "txkernel prune: %v; stop that kernel first\n", err)
		} else {
			fmt.Fprintf(stderr, "txkernel prune: %v\n", err)
		}
		return 1
	}
	if *dryRun {
		fmt.Fprintf(stdout, "dry run: would prune %d terminal transaction(s) older than %s; kept %d not terminal and %d newer; nothing was removed\n",
			len(res.Removed), &olderThan, res.KeptLive, res.KeptYoung)
		return 0
	}
	fmt.Fprintf(stdout, "pruned %d terminal transaction(s); kept %d not terminal and %d newer than %s\n",
		len(res.Removed), res.KeptLive, res.KeptYoung, &olderThan)
	return 0
}

// ageUnits are the units --older-than accepts, each unambiguous. "m" is
// refused on purpose: read as minutes by Go and as months by people, a
// wrong guess deletes audit history (`prune --older-than 1m`).
var ageUnits = []struct {
	suffix string
	unit   time.Duration
}{
	{"w", 7 * 24 * time.Hour},
	{"d", 24 * time.Hour},
	{"h", time.Hour},
	{"min", time.Minute},
	{"s", time.Second},
}

// ageChoices names ageUnits for help and errors.
const ageChoices = "w (weeks), d (days), h (hours), min (minutes) or s (seconds), e.g. 2w, 30d, 12h, 90min"

// age is a flag.Value for an age: a whole, non-negative number followed by
// one unit of ageUnits ("30d", "12h", "90min", "2w"). It prints in the
// largest unit that divides it, so help shows "30d", not "720h0m0s".
type age time.Duration

// String implements flag.Value.
func (a *age) String() string {
	d := time.Duration(*a)
	for _, u := range ageUnits {
		if d > 0 && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.suffix
		}
	}
	return "0s"
}

// Set implements flag.Value. Errors name the accepted units: a number that
// is not a non-negative integer, an ambiguous or unknown unit ("m", "M",
// "mo", "y"), or an age past the largest duration.
func (a *age) Set(s string) error {
	for _, u := range ageUnits {
		n, ok := strings.CutSuffix(s, u.suffix)
		if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil || v > uint64(math.MaxInt64/int64(u.unit)) {
			return fmt.Errorf("%q is too large", s)
		}
		*a = age(time.Duration(v) * u.unit)
		return nil
	}
	if strings.HasSuffix(s, "m") || strings.HasSuffix(s, "M") || strings.HasSuffix(s, "mo") {
		return fmt.Errorf("%q is ambiguous (minutes or months?): use %s", s, ageChoices)
	}
	return fmt.Errorf("%q is not an age: use a whole number and %s", s, ageChoices)
}

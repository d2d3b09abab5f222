package main

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

// prune is `txkernel prune --data-dir D [--older-than AGE]`: it removes
// terminal transactions whose last state change is older than AGE (days
// such as 30d, or a Go duration such as 720h; 30d by default), printing
// each id it removed. Exit status: 0 on success, 1 when a kernel holds the
// data dir or an I/O error stops it, 2 on a usage error.
func prune(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "the kernel's data directory (required)")
	olderThan := age(defaultPruneAge)
	fs.Var(&olderThan, "older-than", "remove terminal transactions whose last state change is older than `AGE`: days (30d) or a Go duration (720h, 90m)")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if *dataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: txkernel prune --data-dir DIR [--older-than AGE]   (AGE: 30d, 720h, 90m; default 30d)")
		return 2
	}
	res, err := tx.Prune(context.Background(), *dataDir, time.Now().Add(-time.Duration(olderThan)))
	if res != nil {
		for _, id := range res.Removed {
			fmt.Fprintln(stdout, "removed", id)
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
	fmt.Fprintf(stdout, "pruned %d terminal transaction(s); kept %d not terminal and %d newer than %s\n",
		len(res.Removed), res.KeptLive, res.KeptYoung, &olderThan)
	return 0
}

// age is a flag.Value for an age: a whole number of days ("30d") or a Go
// duration ("720h", "90m"), never negative. It prints in days when it is a
// whole number of them, so help shows "30d", not "720h0m0s".
type age time.Duration

// String implements flag.Value.
func (a *age) String() string {
	d := time.Duration(*a)
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// Set implements flag.Value. Errors: a number of days that is not a
// non-negative integer, an unparsable duration, or a negative one.
func (a *age) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 64)
		if err != nil || days > uint64(math.MaxInt64/int64(24*time.Hour)) {
			return fmt.Errorf("want a whole number of days such as 30d, or a duration such as 720h")
		}
		*a = age(time.Duration(days) * 24 * time.Hour)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a whole number of days such as 30d, or a duration such as 720h")
	}
	*a = age(d)
	return nil
}

package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Claim implements memory.Store (store.MemoryStore.Claim): under the
// scope's advisory lock, so the check and the claim are one step for
// every kernel on the database. An accept's proposal must still be open
// (errs.Closed). A claim another transaction holds is refused
// (errs.Conflict) while it is live, and taken over once its holder is
// known to have ended or its lease expired (claimLive).
func (m *Memory) Claim(ctx context.Context, c memory.Claim) (string, error) {
	var current string
	err := m.write(ctx, c.Scope, func(tx pgx.Tx) error {
		current = ""
		if c.ProposalID != "" {
			if _, err := openProposal(ctx, tx, c.Scope, c.ProposalID); err != nil {
				return err
			}
		}
		holder, err := claimHolder(ctx, tx, c.Scope, c.ClaimKey())
		if err != nil {
			return err
		}
		if holder != "" && holder != c.TxID {
			return memory.ErrClaimed(c.ClaimKey(), holder)
		}
		if c.ElementID != "" {
			err = tx.QueryRow(ctx, `SELECT v.version_id FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
				WHERE `+scopeAt(1)+` AND e.element_id = $4`, append(scopeArgs(c.Scope), c.ElementID)...).Scan(&current)
			if errors.Is(err, pgx.ErrNoRows) {
				return memory.ErrElementNotFound(c.ElementID)
			}
			if err != nil {
				return internal(err, "read head")
			}
			if current != c.TargetVersionID {
				return memory.ErrClaimMoved(c.ElementID, current)
			}
		} else {
			err = tx.QueryRow(ctx, `SELECT b.baseline_id FROM mem_pointers e JOIN mem_baselines b ON b.bid = e.bid WHERE `+scopeAt(1), scopeArgs(c.Scope)...).Scan(&current)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return internal(err, "read pointer")
			}
			if current != c.Pointer {
				return memory.ErrClaimMoved("", current)
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO mem_claims (tenant_id, organization_id, repository_id, claim_key, tx_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant_id, organization_id, repository_id, claim_key) DO UPDATE SET tx_id = excluded.tx_id, created_at = excluded.created_at`,
			c.Scope.TenantID, c.Scope.OrganizationID, c.Scope.RepositoryID, c.ClaimKey(), c.TxID, now())
		return internalIf(err, "take claim")
	})
	return current, err
}

// claimHolder is the transaction holding key in scope while its claim is
// live, or "": a claim whose holder ended (claimLive) is dropped here, so
// whoever asks next may take it.
func claimHolder(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, key string) (string, error) {
	var holder, at string
	err := tx.QueryRow(ctx, `SELECT tx_id, created_at FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND claim_key = $4`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, key).Scan(&holder, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", internal(err, "read claim")
	}
	live, err := claimLive(ctx, tx, holder, at)
	if err != nil || live {
		return holder, err
	}
	_, err = tx.Exec(ctx, `DELETE FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND claim_key = $4 AND tx_id = $5`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, key, holder)
	return "", internalIf(err, "drop an ended claim")
}

// claimLive reports whether holder's claim, taken at at, still holds: its
// lease (memory.ClaimLease) has not expired, the transaction has not
// committed (no version or baseline carries its id), and no proposal it
// accepts was decided (by it or by anyone else: a reject from another
// kernel ends an accept's claim).
func claimLive(ctx context.Context, tx pgx.Tx, holder, at string) (bool, error) {
	if memory.ClaimExpired(at, time.Now()) {
		return false, nil
	}
	var ended bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mem_versions WHERE tx_id = $1)
		OR EXISTS (SELECT 1 FROM mem_baselines WHERE tx_id = $1)
		OR EXISTS (SELECT 1 FROM mem_proposals WHERE accept_tx_id = $1 AND status <> $2)`, holder, protocol.ProposalOpen).Scan(&ended)
	if err != nil {
		return false, internal(err, "read claim holder")
	}
	return !ended, nil
}

// refuseClaimed refuses (memory.ErrClaimed) a decision or an ingest that
// would change element while a live claim holds it: an accept that
// checked its base must not find it moved, or its proposal decided, when
// it commits.
func refuseClaimed(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, elementIDs ...string) error {
	keys := make([]string, len(elementIDs))
	for i, id := range elementIDs {
		keys[i] = memory.Claim{ElementID: id}.ClaimKey()
	}
	// One query finds the claims of every element (an ingest batch);
	// each one found is then looked at on its own.
	rows, err := tx.Query(ctx, `SELECT claim_key FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND claim_key = ANY($4)`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, keys)
	if err != nil {
		return internal(err, "read claims")
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return internal(err, "read claims")
	}
	for _, key := range found {
		holder, err := claimHolder(ctx, tx, scope, key)
		if err != nil {
			return err
		}
		if holder != "" {
			return memory.ErrClaimed(key, holder)
		}
	}
	return nil
}

// checkHeld refuses (memory.ErrClaimLost) the commit of txID when another
// transaction holds key: txID's claim was taken over after its lease.
func checkHeld(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, key, txID string) error {
	var holder string
	err := tx.QueryRow(ctx, `SELECT tx_id FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND claim_key = $4`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, key).Scan(&holder)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return internal(err, "read claim")
	}
	// No claim at all is no refusal: one taken over was released by its
	// taker, and the commit's own base check (the element's head) decides.
	if holder != "" && holder != txID {
		return memory.ErrClaimLost(key, txID, holder)
	}
	return nil
}

// Unclaim implements memory.Store.
func (m *Memory) Unclaim(ctx context.Context, scope protocol.MemoryScope, txID string) error {
	return m.write(ctx, scope, func(tx pgx.Tx) error { return unclaim(ctx, tx, scope, txID) })
}

func unclaim(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, txID string) error {
	_, err := tx.Exec(ctx, `DELETE FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND tx_id = $4`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, txID)
	return internalIf(err, "drop claim")
}

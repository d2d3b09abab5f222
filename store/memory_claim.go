package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Curation claims: what an accept or a promote is about to change,
// reserved from its base check to its commit. Within one kernel the
// engine's lock keys already serialise them; a claim in the database
// serialises them across the kernels that share a memory (a team's
// PostgreSQL, store/postgres), and both stores keep the same rule.

// Claim reserves c.ClaimKey() for c.TxID and checks, in the same SQL
// transaction, that what the transaction's base check saw still holds:
// the element's newest version is c.TargetVersionID (accept), or the
// pointer is at c.Pointer (promote), and that an accept's proposal
// (c.ProposalID) is still open (errs.Closed). It returns errs.Stale and the current
// version or baseline id when it moved, and errs.Conflict (memory.ClaimedData)
// while another transaction holds the claim. Taking a claim the same
// transaction holds is a no-op, so a retried apply may claim again.
func (s *MemoryStore) Claim(ctx context.Context, c memory.Claim) (string, error) {
	var current string
	err := s.tx(ctx, func(t *sql.Tx) error {
		if c.ProposalID != "" {
			if _, err := openProposal(ctx, t, c.Scope, c.ProposalID); err != nil {
				return err
			}
		}
		var holder string
		err := t.QueryRowContext(ctx, `SELECT tx_id FROM mem_claims WHERE tenant_id = ? AND organization_id = ? AND repository_id = ? AND claim_key = ?`,
			c.Scope.TenantID, c.Scope.OrganizationID, c.Scope.RepositoryID, c.ClaimKey()).Scan(&holder)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return internal(err, "read claim")
		}
		if holder != "" && holder != c.TxID {
			return memory.ErrClaimed(c.ClaimKey(), holder)
		}
		if c.ElementID != "" {
			err = t.QueryRowContext(ctx, `SELECT v.version_id FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
				WHERE `+scopeWhere+` AND e.element_id = ?`, append(scopeArgs(c.Scope), c.ElementID)...).Scan(&current)
			if errors.Is(err, sql.ErrNoRows) {
				return memory.ErrElementNotFound(c.ElementID)
			}
			if err != nil {
				return internal(err, "read head")
			}
			if current != c.TargetVersionID {
				return memory.ErrClaimMoved(c.ElementID, current)
			}
		} else {
			err = t.QueryRowContext(ctx, `SELECT b.baseline_id FROM mem_pointers e JOIN mem_baselines b ON b.bid = e.bid WHERE `+scopeWhere, scopeArgs(c.Scope)...).Scan(&current)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return internal(err, "read pointer")
			}
			if current != c.Pointer {
				return memory.ErrClaimMoved("", current)
			}
		}
		_, err = t.ExecContext(ctx, `INSERT OR REPLACE INTO mem_claims (tenant_id, organization_id, repository_id, claim_key, tx_id, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			c.Scope.TenantID, c.Scope.OrganizationID, c.Scope.RepositoryID, c.ClaimKey(), c.TxID, now())
		return internalIf(err, "take claim")
	})
	return current, err
}

// Unclaim drops the claims of txID in scope (an apply that did not
// commit); none is fine.
func (s *MemoryStore) Unclaim(ctx context.Context, scope protocol.MemoryScope, txID string) error {
	return s.tx(ctx, func(t *sql.Tx) error {
		return unclaim(ctx, t, scope, txID)
	})
}

func unclaim(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, txID string) error {
	_, err := t.ExecContext(ctx, `DELETE FROM mem_claims WHERE tenant_id = ? AND organization_id = ? AND repository_id = ? AND tx_id = ?`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, txID)
	return internalIf(err, "drop claim")
}

// internalIf is internal for a non-nil error.
func internalIf(err error, what string) error {
	if err == nil {
		return nil
	}
	return internal(err, what)
}

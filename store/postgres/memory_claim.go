package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// Claim implements store.Memory (store.MemoryStore.Claim): under the
// scope's advisory lock, so the check and the claim are one step for
// every kernel on the database.
func (m *Memory) Claim(ctx context.Context, c store.MemClaim) (string, error) {
	var current string
	err := m.write(ctx, c.Scope, func(tx pgx.Tx) error {
		current = ""
		var holder string
		err := tx.QueryRow(ctx, `SELECT tx_id FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND claim_key = $4`,
			c.Scope.TenantID, c.Scope.OrganizationID, c.Scope.RepositoryID, c.ClaimKey()).Scan(&holder)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return internal(err, "read claim")
		}
		if holder != "" && holder != c.TxID {
			return store.ErrClaimed(c.ClaimKey(), holder)
		}
		if c.ElementID != "" {
			err = tx.QueryRow(ctx, `SELECT v.version_id FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
				WHERE `+scopeAt(1)+` AND e.element_id = $4`, append(scopeArgs(c.Scope), c.ElementID)...).Scan(&current)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrElementNotFound(c.ElementID)
			}
			if err != nil {
				return internal(err, "read head")
			}
			if current != c.TargetVersionID {
				return store.ErrClaimMoved(c.ElementID, current)
			}
		} else {
			err = tx.QueryRow(ctx, `SELECT b.baseline_id FROM mem_pointers e JOIN mem_baselines b ON b.bid = e.bid WHERE `+scopeAt(1), scopeArgs(c.Scope)...).Scan(&current)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return internal(err, "read pointer")
			}
			if current != c.Pointer {
				return store.ErrClaimMoved("", current)
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO mem_claims (tenant_id, organization_id, repository_id, claim_key, tx_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant_id, organization_id, repository_id, claim_key) DO UPDATE SET tx_id = excluded.tx_id, created_at = excluded.created_at`,
			c.Scope.TenantID, c.Scope.OrganizationID, c.Scope.RepositoryID, c.ClaimKey(), c.TxID, now())
		return internalIf(err, "take claim")
	})
	return current, err
}

// Unclaim implements store.Memory.
func (m *Memory) Unclaim(ctx context.Context, scope protocol.MemoryScope, txID string) error {
	return m.write(ctx, scope, func(tx pgx.Tx) error { return unclaim(ctx, tx, scope, txID) })
}

func unclaim(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, txID string) error {
	_, err := tx.Exec(ctx, `DELETE FROM mem_claims WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND tx_id = $4`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, txID)
	return internalIf(err, "drop claim")
}

package watch

import (
	"encoding/json"
	"sort"

	"github.com/gpumarket/gpumarket/domain"
)

// Helpers of the kinds that watch the ledger's rows (starts_in, idle).

// rowsWhat says which rows a rule watches: all of them, those of one
// kind, or one row.
func rowsWhat(all, ofKind, kind, id string) string {
	switch {
	case id != "":
		return "ledger row " + id
	case kind != "":
		return ofKind + kind
	}
	return all
}

// checkRowKind refuses a kind of row that is not a block, reservation or
// fleet; for says what a fleet is to the rule.
func checkRowKind(kind, fleet string) error {
	if kind != "" && kind != domain.KindBlock && kind != domain.KindReservation && kind != domain.KindFleet {
		return ruleErr("kind", "%q; want %s, %s or %s%s, or none for all three", kind, domain.KindBlock, domain.KindReservation, domain.KindFleet, fleet)
	}
	return nil
}

// toldRows are the rows a rule's memo holds as told.
func toldRows(st *ruleState) []string {
	var told []string
	if len(st.Memo) > 0 {
		json.Unmarshal(st.Memo, &told)
	}
	return told
}

// keepRows makes keep the rows the rule's memo holds as told.
func keepRows(st *ruleState, keep []string) {
	sort.Strings(keep)
	if len(keep) == 0 {
		st.Memo = nil
		return
	}
	st.Memo, _ = json.Marshal(keep)
}

package watch

import (
	"encoding/json"
	"sort"

	"github.com/gpumarket/gpumarket/domain"
)

// rowsWhat says which of the ledger's rows a rule watches.
func rowsWhat(all, ofKind, kind, id string) string {
	switch {
	case id != "":
		return "ledger row " + id
	case kind != "":
		return ofKind + kind
	}
	return all
}

// checkRowKind refuses a kind of row gpumarket does not book.
func checkRowKind(kind, fleet string) error {
	if kind != "" && kind != domain.KindBlock && kind != domain.KindReservation && kind != domain.KindFleet {
		return ruleErr("kind", "%q; want %s, %s or %s%s, or none for all three", kind, domain.KindBlock, domain.KindReservation, domain.KindFleet, fleet)
	}
	return nil
}

func toldRows(st *ruleState) []string {
	var told []string
	if len(st.Memo) > 0 {
		json.Unmarshal(st.Memo, &told)
	}
	return told
}

// keepRows keeps the rows told in the rule's memo.
func keepRows(st *ruleState, keep []string) {
	sort.Strings(keep)
	if len(keep) == 0 {
		st.Memo = nil
		return
	}
	st.Memo, _ = json.Marshal(keep)
}

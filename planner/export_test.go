package planner

// SetFanoutToBudget sets whether an expansion step caps a node's fanout
// at the budget's room left (fanoutFor), for TestFanoutToBudgetChangesNoAnswer,
// and returns the setting before.
func SetFanoutToBudget(on bool) bool {
	was := fanoutToBudget
	fanoutToBudget = on
	return was
}

// KeepBestResumed is how many expansion steps went on past a fanout
// capped at the budget's room, so far.
func KeepBestResumed() int64 { return keepBestResumed.Load() }

// AnswerKey is answerKey, for the external tests.
var AnswerKey = answerKey

package pgtest

import (
	"testing"

	"github.com/engagement-scheduler/engagement/internal/sqlfile"
)

// Every statement of the test kit's machinery plans against a migrated
// database.
func TestEveryQueryPlansAgainstTheSchema(t *testing.T) {
	t.Parallel()
	id := "00000000-0000-0000-0000-000000000001"
	none := sqlfile.None{}
	Explain(t,
		kitCanCreateDatabasesQuery.Bind(none),
		kitServerVersionQuery.Bind(none),
		kitDisconnectQuery.Bind(kitDisconnectArgs{Datname: "engagement"}),
		kitTemplateLockQuery.Bind(kitTemplateLockArgs{Key: templateLockKey}),
		kitTemplateUnlockQuery.Bind(kitTemplateUnlockArgs{Key: templateLockKey}),
		kitDatabaseExistsQuery.Bind(kitDatabaseExistsArgs{Datname: "engagement"}),
		kitDatabasesLikeQuery.Bind(kitDatabasesLikeArgs{Pattern: `engagement\_test\_%`}),
		kitSharedLockQuery.Bind(kitSharedLockArgs{Class: int(sharedLockClass), Datname: "engagement_shared_x"}),
		kitSharedTryLockQuery.Bind(kitSharedTryLockArgs{Class: int(sharedLockClass), Datname: "engagement_shared_x"}),
		kitSharedUnlockQuery.Bind(kitSharedUnlockArgs{Class: int(sharedLockClass), Datname: "engagement_shared_x"}),
		kitInRecoveryQuery.Bind(none),
		kitReplayPauseQuery.Bind(none),
		kitReplayPauseStateQuery.Bind(none),
		kitReplayResumeQuery.Bind(none),
		kitWalInsertLsnQuery.Bind(none),
		kitStandbyReachedQuery.Bind(kitStandbyReachedArgs{Received: true, Lsn: "0/3000000"}),
		kitFlushQuery.Bind(none),
		kitServerIdentityQuery.Bind(none),
		kitSettingsQuery.Bind(none),
		kitCurrentDatabaseQuery.Bind(none),
		kitBackendPIDQuery.Bind(none),
		kitAddProfileQuery.Bind(none),
		kitCountProfilesQuery.Bind(kitCountProfilesArgs{UserIDs: []string{id}}),
	)
}

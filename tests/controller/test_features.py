"""UpdateFeatures on the controller, in process: Kafka 4.4.0's checks (FeatureControlManager.updateFeatures) and the
feature_level records it commits, which every image applies."""
from __future__ import annotations

import random

from kafka import errors as E

from reference_broker.clock import ManualClock
from reference_broker.config import BrokerConfig
from reference_broker.controller.quorum_controller import QuorumController
from reference_broker.log.memory import MemoryLog

UPGRADE, SAFE, UNSAFE = 1, 2, 3
INVALID = E.InvalidUpdateVersionError.errno
PREFIX = "The update failed for all features since the following feature had an error: "


def controller() -> QuorumController:
    c = QuorumController(BrokerConfig(), MemoryLog(), ManualClock(), random.Random(1))
    c.bootstrap_features()
    return c


def test_refusals_in_kafkas_words_and_nothing_written() -> None:
    c = controller()
    end = c.end_offset
    cases = [
        ([("transaction.version", 1, UPGRADE)],
         "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature "
         "without setting the upgrade type to either safe or unsafe downgrade."),
        ([("transaction.version", 3, UPGRADE)],
         "Invalid update version 3 for feature transaction.version. Local controller 0 only supports versions 0-2"),
        ([("share.version", 1, UPGRADE)],
         "Invalid update version 1 for feature share.version. Local controller 0 does not support this feature."),
        ([("transaction.version", -1, SAFE)],
         "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0."),
        ([("eligible.leader.replicas.version", 0, SAFE), ("kraft.version", 0, 9)],
         "Invalid update version 0 for feature kraft.version. The controller does not support the given upgrade "
         "type."),
    ]
    for updates, why in cases:
        assert c.update_features(updates, False) == (INVALID, PREFIX + why)
    assert c.end_offset == end, "a refused update (all or nothing) writes no record"
    assert c.image.feature("eligible.leader.replicas.version") == 1


def test_downgrade_and_upgrade_are_committed_and_elr_off_clears_elr() -> None:
    c = controller()
    assert c.update_features([("transaction.version", 1, SAFE)], True) == (0, None)
    assert c.image.feature("transaction.version") == 2, "validate_only writes nothing"
    assert c.update_features([("transaction.version", 1, SAFE)], False) == (0, None)
    assert c.image.feature("transaction.version") == 1
    assert c.update_features([("transaction.version", 2, SAFE)], False)[0] == INVALID   # "to a newer version"
    assert c.update_features([("transaction.version", 2, UPGRADE)], False) == (0, None)
    assert c.update_features([("eligible.leader.replicas.version", 0, UNSAFE)], False) == (0, None)
    assert "eligible.leader.replicas.version" not in c.image.features and not c.image.elr_enabled

//! Seeds that once failed on fresh random ranges, each fixed in the core or in the checker's
//! reading of GUARANTEES.md (the ones whose exemption a GUARANTEES.md line states), run again
//! with the shape `explore` gives them by default (3 instances × 2 jobs, 120 s, a 10 s
//! session). A failing one here is a regression: replay it with the command the assertion
//! prints.

use std::time::Duration;

use shardcron_core::runtime::DEFAULT_FIRE_LEAD;
use shardcron_sim::explore::ExploreOptions;
use shardcron_sim::FaultProfile;

/// Seed, profile, and what was wrong.
const FIXED: &[(u64, FaultProfile, &str)] = &[
    (506_685_038, FaultProfile::Chaos, "a restart in the millisecond of a fire"),
    (871_645_902, FaultProfile::Failover, "a restart in the millisecond of a reshard"),
    (3_896_835_122, FaultProfile::Chaos, "a reshard flag stamped by a clock set back unseen"),
    (485_715_790, FaultProfile::Chaos, "a reshard flag stamped by a clock set back unseen"),
    (3_896_834_009, FaultProfile::Chaos, "a departure nobody was up to see"),
    (3_303_087_331, FaultProfile::Chaos, "claimed re-runs unrun after failover was turned off"),
    (2_272_662_923, FaultProfile::Chaos, "an unrecorded interrupted run given a restart's fire"),
    (1_517_309_833, FaultProfile::Garbage, "garbage in a claimed-over marker left unreported"),
    (532_648_578, FaultProfile::Garbage, "a first reshard's flag deleted while a fire waited"),
    (532_654_249, FaultProfile::Failover, "every item marked for a fire its reshard answered"),
    (693_228_483, FaultProfile::Chaos, "a restart without a ledger, given items before it"),
    (330_603_240, FaultProfile::Garbage, "a leader node deleted and won again at a commit"),
    (1_968_787_309, FaultProfile::Chaos, "a catch-up's heir down when a late reshard came"),
    (2_601_737_418, FaultProfile::Lease, "fires overtaken while a new session registered"),
    (3_868_854_017, FaultProfile::Garbage, "a fire handled late, garbage landing meanwhile"),
    (1_181_518_338, FaultProfile::Chaos, "a re-registration's fire under the reshard it asked for"),
    (1_100_306_365, FaultProfile::Chaos, "orphans waiting while a fire waited for a reshard"),
    (1_409_142_145, FaultProfile::Chaos, "orphans waiting while a fire waited for a reshard"),
    (1_786_886_286, FaultProfile::Chaos, "a finish queued behind a slow request, then a crash"),
    (
        1_739_174_919,
        FaultProfile::Failover,
        "a superseded fire counted by a departure and a restart",
    ),
    (1_177_896_391, FaultProfile::Chaos, "a cron change before a clock behind reached a fire"),
    (1_035_540_847, FaultProfile::Chaos, "a catch-up waiting for a reshard, then the job removed"),
    (
        173_031_817,
        FaultProfile::Chaos,
        "a catch-up given to an owner cut off, then the job removed",
    ),
    (581_922_074, FaultProfile::Chaos, "a restart's interrupted run behind its own missed entry"),
    (1_130_952_448, FaultProfile::Chaos, "a run started with failover off queued at a restart"),
    (581_922_752, FaultProfile::Chaos, "a crash's catch-up behind two reshards, then removal"),
    (581_922_831, FaultProfile::Chaos, "a fire superseded by a reshard while a run went on"),
    (537_321_492, FaultProfile::Failover, "a catch-up due while its item was disabled"),
    (733_006_803, FaultProfile::Chaos, "a catch-up owed by an item disabled before the skip"),
    (537_321_816, FaultProfile::Chaos, "a cron change before an unchecked clock behind got there"),
    (7_848_411, FaultProfile::Chaos, "a catch-up given to an owner cut off, then a count change"),
    (477_835_834, FaultProfile::Chaos, "a fire overtaken while a crashed leader's reshard waited"),
    (1_808_656_480, FaultProfile::Chaos, "a re-run and a catch-up of the same fire both ran"),
    (
        315_122_289,
        FaultProfile::Failover,
        "an overtaken fire counted by the old owner's restart and the new owner's",
    ),
    (53_084_486, FaultProfile::Chaos, "a departure's queue writing one misfire marker twice"),
    (
        2_983_438_997,
        FaultProfile::Chaos,
        "a catch-up whose new owner was cut off in its run, then the job removed",
    ),
    (1_134, FaultProfile::Lease, "a catch-up that waited for two reshards in a row"),
    (1_146, FaultProfile::Lease, "a catch-up whose reshard came in the ms its run ended"),
    (2_320_651_129, FaultProfile::Failover, "a misfire and the reshard that made its item, one ms"),
    (836_920_862, FaultProfile::Lease, "a catch-up behind a re-run of its item, then a reshard"),
    (830_029_761, FaultProfile::Lease, "a disabled owner's catch-up held, then its item removed"),
    (1_389, FaultProfile::Lease, "a catch-up started after a claim lost to an unseen reshard"),
    (
        3_780_741_665,
        FaultProfile::Lease,
        "a peer's entry counted as waiting from a look, not its queue",
    ),
    (1_215, FaultProfile::Lease, "a claim of a share failed by one item's lingering failover node"),
    (1_077, FaultProfile::Lease, "a catch-up behind the run in flight and a claimed re-run"),
    (
        942_392_493,
        FaultProfile::Lease,
        "a reshard flag held up behind runs longer than the session",
    ),
    (
        3_924_902_754,
        FaultProfile::Failover,
        "an overtaken fire whose only other instance up had its server disabled",
    ),
    (800_060_818, FaultProfile::Chaos, "a raise while the end before a catch-up was on its way"),
    (2_696_810_239, FaultProfile::Failover, "an owner crashed before it wrote its first ledger"),
    (4_132_758_956, FaultProfile::Chaos, "an owner crashed while registering, back under its id"),
    (3_825_523_677, FaultProfile::Chaos, "a cron change armed by a clock set back: a fire rerun"),
    // Two seeds that ran a fire twice under a first fix of that one (the comeback's
    // registration counted the fires from the record's mark), taken back.
    (3_214_563_204, FaultProfile::Failover, "a departure queued, the comeback counted it again"),
    (3_214_563_573, FaultProfile::Failover, "another double run of that first fix"),
    (2_047_788_398, FaultProfile::Failover, "a restamp beaten by raises that kept the time"),
    (4_182_359_914, FaultProfile::Lease, "a catch-up waiting for a run its owner's crash cut"),
    (2_791_446_815, FaultProfile::Lease, "fires queued behind a waiting catch-up, then a crash"),
    (3_094_299_706, FaultProfile::Chaos, "a catch-up's owner's clock went off during its run"),
    (330_605_441, FaultProfile::Garbage, "a deleted config written back with an older cron"),
    (1_321_827_811, FaultProfile::Garbage, "a deleted config published by a restart with its own"),
    (3_401_235_278, FaultProfile::Garbage, "a departed holder's marker garbage, queued unreported"),
    // Found with a 50 ms fire lead (the default since): a raise stamped by the registry's
    // time, the lead behind the peers' clocks, handed a fire a peer had started to a new owner.
    (3_666_279_373, FaultProfile::Chaos, "a raise stamped the fire lead behind the clocks"),
    // An emptied ledger read as "no mark": the crash after it left a missed fire to nobody.
    (1_776_668_981, FaultProfile::Garbage, "a ledger emptied, its owner cut off and crashed"),
    // Watches that fall behind (etcd's late events): a view showing one reshard write before
    // another, or a raise not yet.
    (3_804_968_304, FaultProfile::Lag, "an item a count change added, its owner node late"),
    (3_824_582_828, FaultProfile::Lag, "an owner node late behind the record and the flag"),
    (3_824_583_170, FaultProfile::Lag, "a start under a raise its view had not shown"),
    (3_824_583_481, FaultProfile::Lag, "a start under a raise its view had not shown"),
];

/// Seeds of the 5 instances × 3 jobs shape with a 4 s session (`--instances 5 --jobs 3
/// --session-timeout 4`).
const FIXED_5X3: &[(u64, FaultProfile, &str)] = &[
    (1_669_791_129, FaultProfile::Default, "a fire handled on a slow link after a later reshard"),
    (2_229_504_887, FaultProfile::Chaos, "a catch-up given to a clock off, then the job removed"),
    (2_332_122_118, FaultProfile::Default, "a misfire whose record came back after a reshard"),
];

/// Seeds of the 5 instances × 3 jobs shape with the default 10 s sessions.
const FIXED_5X3_SESSION_10: &[(u64, FaultProfile, &str)] = &[
    (2_363_014_749, FaultProfile::Chaos, "fires a new instance's items got while it registered"),
    (1_173_065_998, FaultProfile::Chaos, "a catch-up queued before a flag run under it: twice"),
    (3_401_134_761, FaultProfile::Garbage, "the record removed, then a crashed owner's node"),
];

/// Seeds of the 3 instances × 3 jobs shape with a 4 s session (`--instances 3 --jobs 3
/// --session-timeout 4`).
const FIXED_3X3_SESSION_4: &[(u64, FaultProfile, &str)] = &[
    (4_099_042_499, FaultProfile::Lease, "an item disabled while its catch-up waited"),
    (1_321_928_369, FaultProfile::Failover, "a finish held behind a wider scope, then a crash"),
];

/// Seeds of the 2 instances × 3 jobs shape with a 6 s session (`--instances 2 --jobs 3
/// --session-timeout 6`).
const FIXED_2X3_SESSION_6: &[(u64, FaultProfile, &str)] =
    &[(2_649_193_502, FaultProfile::Chaos, "two reshards shown late to a registering instance")];

/// Seeds of one instance with five jobs (`--instances 1 --jobs 5`).
const FIXED_1X5: &[(u64, FaultProfile, &str)] = &[
    (3_885_147_064, FaultProfile::Chaos, "a restart's missed fire run again after a clock jump"),
    (1_974_571_948, FaultProfile::Chaos, "a job removed before its first fire, added while slow"),
    (2_905_680_891, FaultProfile::Garbage, "ledger garbage deleted unsaid by a stopping leave"),
    (1_360_704_030, FaultProfile::Garbage, "ledger garbage as the only instance's session ended"),
    (3_520_241_126, FaultProfile::Garbage, "an enable refused for a config deleted, all disabled"),
];

/// Seeds of the 10 instances × 10 jobs shape (`--instances 10 --jobs 10`).
const FIXED_10X10: &[(u64, FaultProfile, &str)] = &[
    (1_012_580_706, FaultProfile::Chaos, "a cron change that reached an owner 9 s late"),
    (2_176_086_081, FaultProfile::Failover, "a late fire of an item disabled meanwhile"),
    (3_983_268_745, FaultProfile::Chaos, "an overtaken fire whose new owner crashed as it waited"),
];

/// Seeds of the 2 instances × 4 jobs shape (`--instances 2 --jobs 4`).
const FIXED_2X4: &[(u64, FaultProfile, &str)] = &[
    (
        2_088_254_478,
        FaultProfile::Chaos,
        "a ledger mark by a clock 8 s behind, as failover was turned on",
    ),
    (
        1_034_104_214,
        FaultProfile::Failover,
        "a fire before the first reshard, recorded by the other instance",
    ),
    (
        1_918_618_267,
        FaultProfile::Chaos,
        "the fires due while a new job's only registration took 7 s",
    ),
    (538_601_397, FaultProfile::Chaos, "a crash's catch-ups, then failover turned off unseen"),
    (2_831_513_216, FaultProfile::Chaos, "a job added while both instances were cut off"),
    (2_601_912_491, FaultProfile::Failover, "a failover while the only survivor was disabled"),
    (595_355_891, FaultProfile::Chaos, "a server disabled between its claim and the re-run"),
    (955_160_766, FaultProfile::Chaos, "a departure handled in the ms its id came back"),
    (417_371_193, FaultProfile::Failover, "a fire overtaken while both instances were down"),
    (487_904_635, FaultProfile::Failover, "a stopped owner's items of a fire at a late raise"),
    (2_136_335_092, FaultProfile::Failover, "a new item's later misfire mark at a late raise"),
    (2_647_375_626, FaultProfile::Failover, "a leave's ledger removal lost to a reshard"),
    (4_293_980_107, FaultProfile::Chaos, "a graceful restart reran a fire a late raise held"),
    (3_868_854_197, FaultProfile::Chaos, "a restart and a survivor counting from one mark"),
];

/// Seeds of clusters of one instance (three jobs) that once failed.
const FIXED_1X3: &[(u64, FaultProfile, &str)] = &[
    (479_507_397, FaultProfile::Failover, "the only instance down at a job's first fire"),
    (479_507_365, FaultProfile::Chaos, "a job added while the only instance was cut off"),
    (479_507_338, FaultProfile::Chaos, "a count grown while the only instance was down"),
    (479_507_292, FaultProfile::Failover, "an orphan's item removed while nobody was up"),
    (909_050_433, FaultProfile::Failover, "an orphan while the only instance was disabled"),
    (264_491_183, FaultProfile::Failover, "a fire that waited for a reshard nobody was up for"),
    (812_787_233, FaultProfile::Chaos, "a count change's items at a fire a late raise let by"),
    (1_258_633_092, FaultProfile::Chaos, "the same, the fire in the ms the raise first wrote"),
    (47_994_016, FaultProfile::Chaos, "the same, the raise sent late behind our own requests"),
    (1_152_359_773, FaultProfile::Chaos, "a clock set right after a restart by a clock ahead"),
    (800_061_542, FaultProfile::Chaos, "a crash before the owner learned failover was on"),
    (2_588_539_946, FaultProfile::Chaos, "a job's first raise moved past the fire it held"),
    (1_188_597_844, FaultProfile::Failover, "a crash after the jobs stopped in a restart"),
    (937_939_617, FaultProfile::Chaos, "clock-skew records of a job's fires before its reshard"),
    (937_940_233, FaultProfile::Chaos, "a job removed before a clock behind reached its fire"),
    (14_732_640, FaultProfile::Failover, "an item disabled before the only instance came back"),
    (200_204_689, FaultProfile::Failover, "a cron change applied late after a session expiry"),
    (3_214_561_033, FaultProfile::Chaos, "a timer handled after the next fire, then a crash"),
    (3_825_525_871, FaultProfile::Chaos, "own markers beyond a count cut while partitioned"),
    (2_052_223_718, FaultProfile::Chaos, "a cron change in the millisecond of a fire both had"),
    (3_868_855_538, FaultProfile::Chaos, "a job added while its scheduler was stopping"),
    (2_601_736_433, FaultProfile::Chaos, "a skipper down 3 s after its run, on a 1 s link"),
    (2_916_928_559, FaultProfile::Chaos, "an added item removed again before its reshard"),
    (2_137_604_737, FaultProfile::Chaos, "an item removed, added back, a misfire before it"),
    (3_178_348_361, FaultProfile::Chaos, "a cron changed twice under a clock 8 s ahead"),
    (1_791_321_886, FaultProfile::Garbage, "an emptied config refused the restart for good"),
    (1_791_321_552, FaultProfile::Garbage, "the same, the crash before it never caught up"),
    (1_791_321_517, FaultProfile::Garbage, "the config deleted while the only server was disabled"),
    (1_360_704_776, FaultProfile::Garbage, "owner garbage while the only server was disabled"),
    (1_360_703_965, FaultProfile::Garbage, "the same, the config deleted: enabled without it"),
    (1_360_703_320, FaultProfile::Garbage, "a garbled marker of an unrecorded end, ledger left"),
    (2_765_115_485, FaultProfile::Chaos, "a late raise's unowned items, failover off since"),
];

/// Seeds of one instance with four jobs over 300 s (`--instances 1 --jobs 4 --duration 300`).
const FIXED_1X4_300_S: &[(u64, FaultProfile, &str)] = &[
    (3_520_240_609, FaultProfile::Garbage, "config garbage deleted before anyone was up"),
    (3_520_241_334, FaultProfile::Garbage, "an enable refused while the only instance was down"),
];

/// Seeds of the default shape (3 instances × 2 jobs) run over 300 s (`--duration 300`).
const FIXED_300_S: &[(u64, FaultProfile, &str)] = &[
    (
        1_321_827_857,
        FaultProfile::Chaos,
        "a fire marked misfired, run again after a clock set back",
    ),
    (2_601_736_288, FaultProfile::Chaos, "an owner 8 s behind crashed before it reached a fire"),
];

/// Seeds of 300 s runs of 4 instances × 2 jobs that once failed.
const FIXED_300_S_4X2: &[(u64, FaultProfile, &str)] =
    &[(1_968_784_869, FaultProfile::Lease, "a restart after a graceful leave, in a fire's ms")];

/// Seeds of 4 instances × 1 job that once failed.
const FIXED_4X1: &[(u64, FaultProfile, &str)] =
    &[(3_868_855_112, FaultProfile::Chaos, "a count change the skipper had not seen yet")];

/// Seeds of 5 instances × 1 job that once failed.
const FIXED_5X1: &[(u64, FaultProfile, &str)] =
    &[(2_440_431_628, FaultProfile::Chaos, "a catch-up given back to its skipper, cut off")];

/// Seeds of 3 instances × 3 jobs that once failed.
const FIXED_3X3: &[(u64, FaultProfile, &str)] =
    &[(2_440_431_947, FaultProfile::Lease, "a catch-up given back to its skipper, cut off")];

/// Seeds of 6 instances × 4 jobs that once failed.
const FIXED_6X4: &[(u64, FaultProfile, &str)] = &[
    (3_339_398, FaultProfile::Lag, "a waited fire overtaken, the next decided still behind"),
    // Any one entry of a watch late (etcd's victim watches): the flag's detail seen at the
    // raise's version, the flag itself not.
    (1_553_391_649, FaultProfile::Victim, "a start under a flag whose detail alone was seen"),
];

/// Seeds of 4 instances × 3 jobs that once failed.
const FIXED_4X3: &[(u64, FaultProfile, &str)] =
    &[(31_533_747, FaultProfile::Victim, "a marker owing the fire seen, its detail late")];

/// Seeds of clusters of two instances with one job that once failed.
const FIXED_2X1: &[(u64, FaultProfile, &str)] = &[
    (238_241_136, FaultProfile::Chaos, "a share claimed one item per second over a 1 s link"),
    (4_231_656_484, FaultProfile::Chaos, "a departed mark kept past its instance's comeback"),
    (4_231_657_252, FaultProfile::Chaos, "a departed mark kept while failover was off"),
    (4_129_504_461, FaultProfile::Chaos, "a crash while the ledger mark was on its way"),
    (936_424_240, FaultProfile::Chaos, "a misfire settled by a claim, owed again by a reshard"),
    (4_182_355_393, FaultProfile::Chaos, "a failover behind superseded fires each compared late"),
    (2_386_385_390, FaultProfile::Garbage, "a count change and garbage over it, seen together"),
    (3_373_457_995, FaultProfile::Garbage, "garbage in a crashed leader's node, it restarted"),
    (385_141_170, FaultProfile::Garbage, "the same, read while the dead session held the node"),
    (3_401_144_059, FaultProfile::Garbage, "the record removed, then a crashed owner's node"),
    (517_348_607, FaultProfile::Garbage, "a departed owner's marker and ledger both garbled"),
    (517_347_409, FaultProfile::Garbage, "an expired session's marker garbled, queued unreported"),
    (3_577_481_010, FaultProfile::Garbage, "a record rebuilt after a raise, read as its answer"),
    (3_577_480_508, FaultProfile::Garbage, "the same, at another fire"),
    (3_577_482_032, FaultProfile::Garbage, "a server enabled, seen with garbage over our leader"),
    (2_826_467_222, FaultProfile::Garbage, "a garbage config replaced at a start, unreported"),
    (3_427_387_281, FaultProfile::Garbage, "server garbage overwritten while its readers were cut"),
    (2_472_651_579, FaultProfile::Garbage, "a catch-up garbage sent to a run fire, then re-run"),
    (532_650_773, FaultProfile::Garbage, "owner garbage of an item a count change removed"),
    (2_601_736_208, FaultProfile::Garbage, "leader garbage as its leader stopped"),
    (4_071_823_425, FaultProfile::Garbage, "a down holder's marker garbled, written over"),
];

/// Seeds found at 3 instances × 1 job.
const FIXED_3X1: &[(u64, FaultProfile, &str)] = &[
    (
        137_794_321,
        FaultProfile::Chaos,
        "a departure the last reshard answered raised again, a catch-up waited till the removal",
    ),
    (4_047_597_926, FaultProfile::Chaos, "a restart in the millisecond of a reshard and a fire"),
    (4_053_787_595, FaultProfile::Chaos, "a catch-up held by a clock set right, tried no more"),
    (4_047_597_879, FaultProfile::Chaos, "a catch-up held by a clock off, then its item removed"),
    (1_676_230_277, FaultProfile::Garbage, "a config deleted and rewritten at the version seen"),
    (4_003_910_573, FaultProfile::Garbage, "owner garbage gone before a leader could read it"),
    (652_610_509, FaultProfile::Garbage, "garbage in the config replaced by a restart's own"),
    (3_577_481_497, FaultProfile::Garbage, "a record rebuilt after a raise, read as its answer"),
    (2_472_651_753, FaultProfile::Garbage, "a catch-up garbage sent to a run fire, cut, re-run"),
    (2_472_653_517, FaultProfile::Chaos, "a catch-up's heir crashed just back, then removal"),
    (3_868_856_086, FaultProfile::Chaos, "an owner on a slow link, a count change meanwhile"),
];

/// Seeds found at 2 instances × 2 jobs.
const FIXED_2X2: &[(u64, FaultProfile, &str)] = &[
    (2_611_186_689, FaultProfile::Lease, "claimed re-runs of two fires run one after the other"),
    (
        3_146_654_328,
        FaultProfile::Lease,
        "a catch-up started after a claim lost to an unseen write",
    ),
    (
        2_908_977_819,
        FaultProfile::Lease,
        "a restarted survivor left a busy claimer's entry waiting behind its run and its crash",
    ),
    (4_047_588_186, FaultProfile::Lease, "re-runs of items a count change removed claimed"),
    (1_793_358_948, FaultProfile::Chaos, "a job's first reshard made while we registered slowly"),
];

/// Runs each seed with `options`' shape, as it was found (without a fire lead: the seeds
/// before the lead was on by default were all found so) and with the runtime's default lead;
/// fails with the replay command of the first that breaks an invariant.
fn hold(seeds: &[(u64, FaultProfile, &str)], options: &ExploreOptions, shape: &str) {
    for &(seed, profile, what) in seeds {
        for fire_lead in [Duration::ZERO, DEFAULT_FIRE_LEAD] {
            let options = ExploreOptions { profile, fire_lead, ..options.clone() };
            let Some(builder) = options.builder(seed) else {
                panic!("no simulation for seed {seed}")
            };
            let report = builder.build().run();
            assert!(
                report.ok(),
                "seed {seed} ({what}) fails again (replay: shardcron-sim replay --seed {seed} \
                 --profile {}{shape} --fire-lead-ms {}):\n{}",
                format!("{profile:?}").to_lowercase(),
                fire_lead.as_millis(),
                report.violations_text()
            );
            assert!(report.item_runs() > 0, "seed {seed}: nothing ran");
        }
    }
}

#[test]
fn fixed_seeds_hold_every_invariant() {
    hold(FIXED, &ExploreOptions::default(), "");
}

/// [`hold`] in a shape of `instances` × `jobs`, with sessions of `session_s` seconds (the
/// default 10 s if `None`); the replay command names the same shape.
fn hold_in(
    seeds: &[(u64, FaultProfile, &str)],
    instances: usize,
    jobs: usize,
    session_s: Option<u64>,
) {
    let mut options = ExploreOptions { instances, jobs, ..ExploreOptions::default() };
    let mut shape = format!(" --instances {instances} --jobs {jobs}");
    if let Some(secs) = session_s {
        options.session_timeout = Duration::from_secs(secs);
        shape.push_str(&format!(" --session-timeout {secs}"));
    }
    hold(seeds, &options, &shape);
}

#[test]
fn fixed_seeds_of_300_s_runs_hold_every_invariant() {
    let options =
        ExploreOptions { duration: Duration::from_secs(300), ..ExploreOptions::default() };
    hold(FIXED_300_S, &options, " --duration 300");
    let four_by_two = ExploreOptions { instances: 4, jobs: 2, ..options.clone() };
    hold(FIXED_300_S_4X2, &four_by_two, " --duration 300 --instances 4 --jobs 2");
    let one_by_four = ExploreOptions { instances: 1, jobs: 4, ..options };
    hold(FIXED_1X4_300_S, &one_by_four, " --duration 300 --instances 1 --jobs 4");
}

#[test]
fn fixed_seeds_of_the_3x1_shape_hold_every_invariant() {
    hold_in(FIXED_3X1, 3, 1, None);
}

#[test]
fn fixed_seeds_of_the_5x3_shape_hold_every_invariant() {
    hold_in(FIXED_5X3, 5, 3, Some(4));
}

#[test]
fn fixed_seeds_of_the_5x3_shape_with_10_s_sessions_hold_every_invariant() {
    hold_in(FIXED_5X3_SESSION_10, 5, 3, None);
}

#[test]
fn fixed_seeds_of_the_3x3_shape_with_4_s_sessions_hold_every_invariant() {
    hold_in(FIXED_3X3_SESSION_4, 3, 3, Some(4));
}

#[test]
fn fixed_seeds_of_the_2x3_shape_with_6_s_sessions_hold_every_invariant() {
    hold_in(FIXED_2X3_SESSION_6, 2, 3, Some(6));
}

#[test]
fn fixed_seeds_of_the_1x5_shape_hold_every_invariant() {
    hold_in(FIXED_1X5, 1, 5, None);
}

#[test]
fn fixed_seeds_of_the_10x10_shape_hold_every_invariant() {
    hold_in(FIXED_10X10, 10, 10, None);
}

#[test]
fn fixed_seeds_of_the_2x4_shape_hold_every_invariant() {
    hold_in(FIXED_2X4, 2, 4, None);
}

#[test]
fn fixed_seeds_of_the_1x3_shape_hold_every_invariant() {
    hold_in(FIXED_1X3, 1, 3, None);
}

#[test]
fn fixed_seeds_of_the_2x1_shape_hold_every_invariant() {
    hold_in(FIXED_2X1, 2, 1, None);
}

#[test]
fn fixed_seeds_of_the_2x2_shape_hold_every_invariant() {
    hold_in(FIXED_2X2, 2, 2, None);
}

#[test]
fn fixed_seeds_of_the_4x1_5x1_3x3_6x4_and_4x3_shapes_hold_every_invariant() {
    hold_in(FIXED_4X1, 4, 1, None);
    hold_in(FIXED_5X1, 5, 1, None);
    hold_in(FIXED_3X3, 3, 3, None);
    hold_in(FIXED_6X4, 6, 4, None);
    hold_in(FIXED_4X3, 4, 3, None);
}

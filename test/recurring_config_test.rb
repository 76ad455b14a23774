# frozen_string_literal: true

require_relative "test_helper"
require "rack/test"
require "solid_jobs/web"
require "solid_jobs/recurring_command"

# Recurring schedules in-process: what configure and task_options refuse
# (naming the schedule), the config file, SolidEngine's NotSupported, and
# what `solid-jobs recurring` and the dashboard show once a node ran.
class RecurringConfigTest < SolidJobsTest
  include Rack::Test::Methods

  def app = SolidJobs::Web.new

  def configure_recurring(schedules)
    SolidJobs.configure { |c| c.recurring = schedules }
  end

  def refused(schedules)
    assert_raises(SolidJobs::ConfigurationError) { configure_recurring(schedules) }.message
  end

  def test_bad_schedules_fail_at_configure_naming_the_schedule
    assert_match(/schedule "a": give every: seconds or cron/, refused("a" => {task: "LedgerTask"}))
    assert_match(/schedule "a": every must be at least 1/, refused("a" => {task: "LedgerTask", every: 0}))
    assert_match(/schedule "a": every must be a whole number/, refused("a" => {task: "LedgerTask", every: 1.5}))
    assert_match(/schedule "a": /, refused("a" => {task: "LedgerTask", every: 10**30}))
    assert_match(/schedule "a": give either every or cron/, refused("a" => {task: "LedgerTask", every: 1, cron: "* * * * *"}))
    assert_match(/schedule "a": .*cron minute field: "61" is out of range/,
                 refused("a" => {task: "LedgerTask", cron: "61 * * * *"}))
    assert_match(/schedule "a": .*Mars/, refused("a" => {task: "LedgerTask", cron: "*/5 * * * *", time_zone: "Mars/Olympus"}))
    assert_match(/schedule "a": time_zone applies to cron/, refused("a" => {task: "LedgerTask", every: 5, time_zone: "UTC"}))
    assert_match(/schedule "a": arguments\[0\] is a Object/,
                 refused("a" => {task: "LedgerTask", every: 1, arguments: [Object.new]}))
    assert_match(/schedule "a": task must name a task class/, refused("a" => {task: "ledger", every: 1}))
    assert_match(/schedule "a": missed must be :latest/, refused("a" => {task: "LedgerTask", every: 1, missed: :all}))
    assert_match(/schedule "a": unknown key\(s\) :colour/, refused("a" => {task: "LedgerTask", every: 1, colour: 1}))
    assert_match(/invalid schedule name "a b"/, refused("a b" => {task: "LedgerTask", every: 1}))
    assert_match(/schedule "a": channel "no space" is not a valid/, refused("a" => {task: "LedgerTask", every: 1,
                                                                                    channel: "no space"}))
    assert_match(/schedule "a": arguments are 104857\d\d bytes of JSON: at most 65536/,
                 refused("a" => {task: "LedgerTask", every: 1, arguments: ["x" * (10 * 1024 * 1024)]}))
    huge = refused("a" => {task: "LedgerTask", cron: "#{"1," * 50_000}1 * * * *"})
    assert_match(/cron spec is 100009 bytes long: at most 512/, huge)
    assert_operator huge.size, :<, 200, "the message does not repeat the spec"
    assert_match(/invalid recurring/, refused([]))
    assert_empty SolidJobs.config.recurring, "a refused configure changes nothing"
  end

  def test_a_good_schedule_is_stored_frozen_with_its_defaults
    configure_recurring("hb" => {"task" => "LedgerTask", "every" => 30, "arguments" => ["x", 1], "missed" => "skip"})
    spec = SolidJobs.config.recurring.fetch("hb")
    assert_equal({name: "hb", task: "LedgerTask", every: 30, arguments: ["x", 1], missed: :skip}, spec)
    assert Ractor.shareable?(spec)
  end

  def test_task_option_recurring_is_checked_at_class_definition_and_named_after_the_task
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new { include SolidJobs::Task }.task_options(recurring: {every: 0})
    end
    assert_match(/every must be at least 1/, error.message)
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.default_task_options = {recurring: {every: 1}} } }

    Object.const_set(:RecurringProbeTask, Class.new(LedgerTask) { task_options recurring: {every: 5}, channel: "probes" })
    schedules = SolidJobs::Recurring.schedules
    probe = schedules.find { |s| s[:name] == "RecurringProbeTask" }
    assert_equal({name: "RecurringProbeTask", task: "RecurringProbeTask", every: 5, arguments: [], missed: :latest}, probe)
    assert_equal "probes", SolidJobs::Recurring.template(probe)[:channel], "the task's own channel"
    # A subclass is not a second schedule.
    Object.const_set(:RecurringProbeChild, Class.new(RecurringProbeTask))
    assert_equal 1, SolidJobs::Recurring.schedules.count { |s| s[:task].start_with?("RecurringProbe") }

    # A namespaced task's schedule is named with dots (names take no ':').
    Object.const_set(:RecurringProbeSpace, Module.new)
    RecurringProbeSpace.const_set(:Invoice, Class.new(LedgerTask) { task_options recurring: {every: 7} })
    assert_equal "RecurringProbeSpace::Invoice",
                 SolidJobs::Recurring.schedules.find { |s| s[:name] == "RecurringProbeSpace.Invoice" }&.fetch(:task)

    configure_recurring("RecurringProbeTask" => {task: "LedgerTask", every: 1})
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs::Recurring.schedules }
  ensure
    Object.send(:remove_const, :RecurringProbeChild) if defined?(RecurringProbeChild)
    Object.send(:remove_const, :RecurringProbeTask) if defined?(RecurringProbeTask)
    Object.send(:remove_const, :RecurringProbeSpace) if defined?(RecurringProbeSpace)
  end

  # Ruby's own autoload (Zeitwerk registers its constants the same way):
  # configure leaves it alone; a node start loads it and uses the task's
  # channel and max_failures, as a node that had it loaded would.
  def test_a_node_resolves_an_autoloaded_task_and_refuses_one_it_cannot_resolve_without_a_channel
    file = File.join(@ledger_dir, "recurring_autoload_probe.rb")
    File.write(file, "class RecurringAutoloadProbe < LedgerTask\n  task_options channel: \"probe-own\", max_failures: 3\nend\n")
    Object.autoload(:RecurringAutoloadProbe, file)
    configure_recurring("auto" => {task: "RecurringAutoloadProbe", every: 1},
                        "other" => {task: "OtherAppsTask", every: 1, channel: "theirs"})
    assert Object.autoload?(:RecurringAutoloadProbe), "configure loads nothing"
    assert_nil SolidJobs::Recurring.task_class("RecurringAutoloadProbe")

    plans = SolidJobs::Recurring.planned.to_h.transform_keys { |spec| spec[:name] }
    assert_nil Object.autoload?(:RecurringAutoloadProbe), "loaded at node start"
    assert_equal({"auto" => {channel: "probe-own", max_failures: 3}, "other" => {channel: "theirs", max_failures: 25}}, plans)

    configure_recurring("ghost" => {task: "RecurringGhost::Task", every: 1})
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::Recurring.planned }
    assert_match(/schedule "ghost": task RecurringGhost::Task is not defined, so its channel is unknown/, error.message)
    assert_match(/define the task .*or give the schedule a channel:/, error.message)
    configure_recurring("plain" => {task: "Comparable", every: 1})
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::Recurring.planned }
    assert_match(/schedule "plain": task Comparable is not a task class/, error.message)

    # An autoload whose file does not define the constant: the app's bug,
    # named with the schedule, at node start.
    broken = File.join(@ledger_dir, "recurring_broken_probe.rb")
    File.write(broken, "# defines nothing\n")
    Object.autoload(:RecurringBrokenProbe, broken)
    configure_recurring("broken" => {task: "RecurringBrokenProbe", every: 1, channel: "x"})
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::Recurring.planned }
    assert_match(/schedule "broken": loading its task RecurringBrokenProbe failed \(NameError: .*RecurringBrokenProbe/,
                 error.message)
  ensure
    Object.send(:remove_const, :RecurringAutoloadProbe) if Object.const_defined?(:RecurringAutoloadProbe, false)
    Object.send(:remove_const, :RecurringBrokenProbe) if Object.const_defined?(:RecurringBrokenProbe, false)
  end

  def test_the_config_file_takes_recurring_and_scheduler
    file = File.join(@ledger_dir, "solid_jobs.yml")
    File.write(file, <<~YAML)
      production:
        scheduler: false
        recurring:
          nightly:
            task: LedgerTask
            every: 86400
            missed: skip
            arguments: ["/tmp/x", "nightly"]
    YAML
    SolidJobs::ConfigFile.new(file, environment: "production").apply
    assert_equal false, SolidJobs.config.scheduler
    assert_equal :skip, SolidJobs.config.recurring.fetch("nightly")[:missed]
    File.write(file, "production:\n  recurring:\n    nightly: {task: LedgerTask, every: -1}\n")
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs::ConfigFile.new(file, environment: "production").apply }
    assert_match(/solid_jobs.yml:2: schedule "nightly": every must be at least 1/, error.message)
  end

  def test_schedules_routed_to_solid_engine_are_not_supported_at_configure
    error = assert_raises(SolidJobs::Backends::NotSupported) do
      SolidJobs.configure do |c|
        c.backends = {engine: {adapter: :solid_engine, url: "unix:///tmp/never.sock"}}
        c.channel_backends = {"fast" => :engine}
        c.recurring = {"hb" => {task: "LedgerTask", every: 1, channel: "fast"}}
      end
    end
    assert_match(/schedule "hb" enqueues to channel "fast", routed to the SolidEngine backend :engine/, error.message)
    assert_equal SolidJobs::Backends::Redis::CAPABILITIES[:recurring], true
    assert_equal SolidJobs::Backends::SolidEngine::CAPABILITIES[:recurring], false
  end

  def test_the_command_and_the_dashboard_list_next_run_last_tick_and_last_job
    configure_solid_jobs(recurring: {"probe" => {task: "LedgerTask", every: 1, arguments: [ledger_path, "tick"]}})
    start_conductor
    eventually("a tick ran", timeout: 10) { ledger_lines.any? { |l| l.start_with?("tick ") } }
    redis.hset(key("recurring:removed"), "tick_ms", 1000, "outcome", "enqueued", "job_id", "gone")
    redis.pexpire(key("recurring:removed"), 60_000)

    rows = SolidJobs::Recurring.status
    probe = rows.find { |r| r.name == "probe" }
    state = redis.hgetall(key("recurring:probe"))
    assert_equal Integer(state["tick_ms"]), probe.last_tick_ms
    assert_equal state["job_id"], probe.last_job_id
    assert_operator probe.next_ms, :>, probe.last_tick_ms
    assert_equal 0, probe.next_ms % 1000
    removed = rows.find { |r| r.name == "removed" }
    refute removed.configured
    assert_operator removed.expires_ms, :>, SolidJobs::Clock.now_ms

    # The command configures the process itself: a fresh configuration
    # (a started node froze this one), with the same schedule.
    @conductor.stop(timeout: 5)
    @conductor = nil
    SolidJobs.reset!
    configure_solid_jobs(recurring: {"probe" => {task: "LedgerTask", every: 1, arguments: [ledger_path, "tick"]}})
    out = StringIO.new
    assert_equal 0, SolidJobs::RecurringCommand.new(["--redis-url", REDIS.url, "--namespace", @namespace], out: out).run
    assert_match(/^probe\s+every 1s\s+LedgerTask\s+default\s+\S+Z\s+\S+Z \(enqueued\)\s+[0-9a-f-]{36}$/, out.string)
    assert_match(/^removed \(not configured; state expires \S+Z\)/, out.string)
    json = StringIO.new
    SolidJobs::RecurringCommand.new(["--json", "--redis-url", REDIS.url, "--namespace", @namespace], out: json).run
    assert_equal %w[probe removed], JSON.parse(json.string).map { |r| r["name"] }

    get "/recurring"
    assert_equal 200, last_response.status
    assert_includes last_response.body, "<code>probe</code>"
    assert_includes last_response.body, "No longer configured"
    get "/recurring.json"
    schedules = JSON.parse(last_response.body).fetch("schedules")
    assert_equal "every 1s", schedules.first["schedule"]
  end
end

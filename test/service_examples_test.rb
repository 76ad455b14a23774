# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "open3"
require "shellwords"
require "yaml"

# examples/: the systemd unit is verified by systemd-analyze (when the host
# has it) and agrees with the shutdown budget; every solid-jobs command the
# examples run (Procfile, the container's HEALTHCHECK and CMD, the
# Kubernetes probes) is run with --help appended, so a flag that does not
# exist fails here and not on a server. (No container engine runs here:
# the Containerfile itself is not built.)
class ServiceExamplesTest < SolidJobsTest
  EXAMPLES = File.join(SolidJobsTestHelpers::ROOT, "examples")

  def unit = File.read(File.join(EXAMPLES, "systemd", "solid-jobs.service"))
  def setting(name) = unit[/^#{name}=(.*)$/, 1]

  def test_the_systemd_unit_verifies_and_fits_the_shutdown_budget
    assert_equal "notify", setting("Type")
    assert_equal "main", setting("NotifyAccess")
    assert_equal "SIGTERM", setting("KillSignal")
    assert_equal "mixed", setting("KillMode")
    stop_budget = SolidJobs::Configuration::DEFAULTS[:shutdown_timeout] + SolidJobs::Conductor::SHUTDOWN_GRACE
    assert_operator Integer(setting("TimeoutStopSec")), :>, stop_budget, "TERM's graceful stop fits before KILL"
    watchdog = Integer(setting("WatchdogSec"))
    defaults = SolidJobs::Configuration::DEFAULTS
    assert_operator watchdog / 2.0, :>=, defaults[:heartbeat_interval] + defaults[:read_timeout],
                    "a ping every WatchdogSec/2 survives a heartbeat that waits out the read timeout"
    assert_solid_jobs_command(setting("ExecStart").delete_prefix("/usr/bin/env "))

    analyze = ENV.fetch("PATH", "").split(":").map { |d| File.join(d, "systemd-analyze") }.find { |f| File.executable?(f) }
    skip "systemd-analyze is not installed" unless analyze
    path = File.join(@ledger_dir, "solid-jobs.service")
    File.write(path, unit)
    out, status = Open3.capture2e(analyze, "verify", path)
    assert status.success?, out
    assert_empty out.lines.grep(/solid-jobs\.service/), "no warning about the unit: #{out}"
  end

  def test_procfile_commands_parse
    lines = File.readlines(File.join(EXAMPLES, "Procfile"), chomp: true).grep(/\A\w+:/)
    assert_equal %w[worker dashboard], lines.map { |l| l[/\A\w+/] }
    lines.each { |l| assert_solid_jobs_command(l.sub(/\A\w+:\s*/, "")) }
  end

  def test_container_commands_parse
    file = File.read(File.join(EXAMPLES, "container", "Containerfile"))
    healthcheck = JSON.parse(file[/^HEALTHCHECK .*?CMD (\[[^\n]*\])$/m, 1])
    assert_equal %w[bundle exec solid-jobs health --local], healthcheck.first(5)
    assert_solid_jobs_command(healthcheck.shelljoin)
    assert_solid_jobs_command(JSON.parse(file[/^CMD (\[.*\])$/, 1]).shelljoin)
    assert_match(/^STOPSIGNAL SIGTERM$/, file)
  end

  def test_kubernetes_probes_parse
    doc = YAML.safe_load_file(File.join(EXAMPLES, "container", "kubernetes.yaml"))
    spec = doc.dig("spec", "template", "spec")
    assert_operator spec["terminationGracePeriodSeconds"], :>,
                    SolidJobs::Configuration::DEFAULTS[:shutdown_timeout] + SolidJobs::Conductor::SHUTDOWN_GRACE
    probes = spec["containers"].first.slice("startupProbe", "livenessProbe", "readinessProbe")
    assert_equal 3, probes.size
    probes.each_value do |probe|
      assert_operator probe["timeoutSeconds"], :>, 3, "the probe's own timeout exceeds the check's --timeout 3"
      assert_solid_jobs_command(probe.dig("exec", "command").shelljoin)
    end
  end

  # `bundle exec solid-jobs ARGS` from an example, with --help: every flag
  # is one the command knows (nothing is loaded or started).
  def assert_solid_jobs_command(command)
    words = Shellwords.split(command.gsub(/\$\{(\w+):-([^}]*)\}/) { ENV.fetch(Regexp.last_match(1), Regexp.last_match(2)) })
    assert_equal %w[bundle exec solid-jobs], words.first(3), command
    out, err, status = SolidJobsCommand.capture3({}, *words.drop(3), "--help")
    assert status.success?, "#{command} --help: #{err}"
    assert_match(/\AUsage: solid-jobs/, out, command)
  end
end

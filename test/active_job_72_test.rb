# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "rbconfig"

# The adapter under Active Job and Active Record 7.2 (Debian unstable's
# 7.2.4, unpacked by script/rails-7.2), in a process of its own beside the
# suite's Active Job 6.1: in a Rails 7.2 app every perform_later asks the
# adapter enqueue_after_transaction_commit?, and perform_all_later calls
# its enqueue_all.
class ActiveJob72Test < SolidJobsTest
  PROBE = File.join(ROOT, "test", "support", "active_job_72_probe.rb")

  # Outside the suite's bundle: this Ruby's gem path (Debian's sqlite3 and
  # redis gems) and 7.2 on RUBYLIB.
  def probe_env
    rubylib, err, status = Open3.capture3(File.join(ROOT, "script", "rails-7.2"))
    assert status.success?, "script/rails-7.2 failed: #{err}"
    {"RUBYLIB" => [rubylib.lines.last.strip, File.join(ROOT, "lib")].join(File::PATH_SEPARATOR),
     "GEM_PATH" => Gem.path.join(File::PATH_SEPARATOR), "SOLID_JOBS_REDIS_URL" => REDIS.url,
     "SOLID_JOBS_NAMESPACE" => @namespace, "SOLID_JOBS_LOG_LEVEL" => "none", "PATH" => ENV.fetch("PATH"),
     "HOME" => Dir.home}
  end

  def probe
    env = probe_env
    # Debian builds the sqlite3 gem's extension for its own Ruby (3.1) only.
    _, why, loads = Open3.capture3(env, RbConfig.ruby, "-e", 'require "sqlite3"', unsetenv_others: true)
    skip "no sqlite3 gem for Ruby #{RUBY_VERSION} here (Debian's is built for 3.1): #{why.lines.first}" unless loads.success?

    out, err, status = Open3.capture3(env, RbConfig.ruby, PROBE, File.join(@ledger_dir, "app.sqlite3"),
                                      unsetenv_others: true)
    assert status.success?, "the probe failed:\n#{err}"
    JSON.parse(out.lines.last)
  end

  def test_a_rails_7_2_app_enqueues_after_commit_in_bulk_and_by_priority
    got = probe
    assert_equal ["7.2.4", "7.2.4"], got.values_at("active_job", "active_record")
    assert_equal 0, got["inside_transaction"], "deferred while the transaction is open"
    assert_equal 1, got["after_commit"], "enqueued when it commits"
    assert_equal 1, got["after_rollback"], "dropped on rollback"
    assert_equal ["committed"], got["accounts"]
    ids = redis.lrange(key("channel:default"), 0, -1).map { |raw| JSON.parse(raw)["id"] }
    assert_includes ids, got["committed_id"], "provider_job_id is the SolidJobs id"

    assert_equal 4, got["after_bulk"]
    assert_equal({"enqueue" => 1, "enqueue_all" => 1}, got["calls"], "perform_all_later is one enqueue_all")
    assert_equal 3, got["bulk_ids"].compact.uniq.size
    assert_equal [got["committed_id"], *got["bulk_ids"]].sort, ids.sort, "what the adapter wrote, nothing else"
    assert_equal [true, true, true], got["bulk_enqueued"]

    level = 7 # Active Job priority 10, by SolidJobs::ActiveJob::PRIORITY_TABLE (as active_job_test on 6.1)
    assert_equal({"default:#{level}" => [[got["prioritized_id"], {"priority" => level}]]}, got["priority_10"],
                 "priority 10 is level #{level}, its own list")
    assert_match(/ArgumentError: .*outside the 64-bit range/, got["big_integer"], "refused with a clear error, not lost")
    assert_equal false, got["stopping"]
  end
end

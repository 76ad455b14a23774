# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require_relative "support/bundle_probe"

# examples/rails_app starts with one command and shows its jobs completing:
# Active Job on thread workers, a plain task in a Ractor, a warm-pool task in
# the warm worker. Outcomes only.
class ExampleAppTest < Minitest::Test
  START = File.expand_path("../examples/rails_app/bin/start", __dir__)

  def test_the_rails_example_runs_with_one_command
    BundleProbe.skip_unless_loads(self, File.expand_path("../examples/rails_app/Gemfile", __dir__),
                                  "Rails 6.1 (examples/rails_app)")
    out, status = Bundler.with_unbundled_env do
      Open3.capture2e({"SOLID_JOBS_LOG_LEVEL" => "info"}, RbConfig.ruby, START)
    end
    assert status.success?, out
    assert_match(/==> all 9 jobs done/, out)
    assert_match(/WelcomeEmailJob: welcome mail for ada -- ran in solid-jobs-thread-worker-\d+/, out)
    assert_match(/NightlyReportJob: report for \S+ \(execution 2\) -- ran in solid-jobs-thread-worker-\d+/, out)
    # Plain tasks run in worker Ractors; a thread worker takes one only
    # while both Ractors are busy (lib/solid_jobs/lanes.rb), so which of
    # the three did is not fixed, only that they ran and Ractors ran some.
    assert_match(/FibonacciTask: fib\(90\) = 2880067194370816120 -- ran in solid-jobs-(thread-)?worker-\d+/, out)
    assert_match(/FibonacciTask: fib\(\d+\) = \d+ -- ran in solid-jobs-worker-\d+/, out)
    warm_pid = out[/warm worker 0 ready on \S+, pid (\d+)/, 1]
    assert_match(/PriceCacheTask: cached 3 prices \(warm pool\) -- ran in main, pid #{warm_pid}/, out)
  end
end

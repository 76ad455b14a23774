# frozen_string_literal: true

# Tasks used by the suite, in-process and by spawned `solid-jobs` processes
# (via --require). They write to a ledger file named in their arguments,
# which works from any Ractor and any process.
module Ledger
  module_function

  def append(path, line)
    File.open(path, "a") { |f| f.write("#{line}\n") }
  end

  def worker_name
    Ractor.current == Ractor.main ? (Thread.current.name || "main") : Ractor.current.name
  end
end

# A bounded poll for code that cannot use the tests' `eventually` (task
# bodies in worker processes and Ractors, the tests' helper threads): true
# once the block is, false after `timeout` seconds.
module Poll
  module_function

  def wait(timeout, every: 0.01)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      return true if yield
      return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      # Polls what another process or thread sets; bounded by the deadline.
      sleep every
    end
  end
end

class LedgerTask
  include SolidJobs::Task

  def execute_task(path, label)
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class CpuTask
  include SolidJobs::Task

  # About a few milliseconds of pure Ruby work, then a ledger line.
  def execute_task(path, label, iterations = 300_000)
    x = 0
    iterations.times { |i| x += i }
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class SlowTask
  include SolidJobs::Task

  def execute_task(path, label, seconds)
    Ledger.append(path, "start #{label}")
    sleep(seconds)
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

# Concurrency limits (docs/flow-control.md): at most 2 running per key,
# across every node. Each run appends "S|E key id seconds pid" to its
# process's own ledger (CLOCK_REALTIME, one host), so a proof can rebuild
# every key's intervals, and a SIGKILL leaves a start without an end.
class FlowLimitedTask
  include SolidJobs::Task
  task_options concurrency: {limit: 2, key: ->(_dir, key, *) { key }}

  def execute_task(dir, key, id, work_ms)
    path = File.join(dir, "flow-#{Process.pid}")
    Ledger.append(path, "S #{key} #{id} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
    sleep(work_ms / 1000.0)
    Ledger.append(path, "E #{key} #{id} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
  end
end

# Rate limits (decision 42): at most 20 starts per 2 s per key, across
# every node. Each run appends "S key id seconds pid" (CLOCK_REALTIME) to
# its process's ledger, so a proof can count starts in every window.
class FlowRatedTask
  include SolidJobs::Task
  task_options rate: {limit: 20, per: 2, key: ->(_dir, key, *) { key }}

  def execute_task(dir, key, id, work_ms)
    Ledger.append(File.join(dir, "rate-#{Process.pid}"),
                  "S #{key} #{id} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
    sleep(work_ms / 1000.0)
  end
end

# Many rate keys, each far under its rate (test/flow_rate_backlog_test.rb):
# a deep backlog of these must drain as fast as the node starts jobs.
class FlowRateSpreadTask
  include SolidJobs::Task
  task_options channel: "spread", rate: {limit: 100, per: 1, key: ->(key, _n) { key }}

  def execute_task(_key, _n) = nil
end

# An unlimited task in another channel, drained beside a throttled key.
class FlowUnlimitedTask
  include SolidJobs::Task
  task_options channel: "plain"

  def execute_task(dir, id)
    Ledger.append(File.join(dir, "plain-#{Process.pid}"), "D #{id}")
  end
end

class FailingTask
  include SolidJobs::Task
  task_options max_failures: 2

  def execute_task(path, label)
    Ledger.append(path, "attempt #{label}")
    raise ArgumentError, "failing on purpose: #{label}"
  end
end

class GlobalTouchingTask
  include SolidJobs::Task

  # Reading a non-shareable constant from a non-main Ractor raises
  # Ractor::IsolationError.
  MUTABLE = +"not shareable"

  def execute_task = MUTABLE.length
end

# The same isolation error, with a retry_delay that asks for retries anyway
# (say the constant is frozen by a later deploy).
class RetriedGlobalTouchingTask < GlobalTouchingTask
  retry_delay { |_failures, error, _envelope| 30 if error.is_a?(Ractor::IsolationError) }
end

class CriticalTask < LedgerTask
  task_options channel: "critical", max_failures: 10
end

class NotATask
  def execute_task(*) = nil
end

# Enqueued only from inside worker Ractors (EnqueuingTask), so its arity
# is never cached by the main Ractor.
class RactorEnqueuedTask < LedgerTask; end

# Enqueues from inside a worker: arguments that fit ("good"), or that do not.
class EnqueuingTask
  include SolidJobs::Task
  task_options max_failures: 1

  def execute_task(path, mode)
    mode == "good" ? RactorEnqueuedTask.enqueue(path, "from-ractor") : RactorEnqueuedTask.enqueue(path)
  end
end

# Takes any number of arguments and does nothing: for tests of enqueue
# itself, where the arguments are the subject.
class AnyArgumentsTask
  include SolidJobs::Task

  def execute_task(*) = nil
end

# An execution interceptor that records each job it wraps in a ledger.
class LedgerInterceptor
  def initialize(path)
    @path = path
  end

  def around(execution)
    Ledger.append(@path, "before #{execution.envelope["task"]} #{Ledger.worker_name}")
    yield
    Ledger.append(@path, "after #{execution.envelope["task"]}")
  end
end

class InvalidCatalog < StandardError; end

# Exercises the failure policy DSL. Arguments: ledger path, label, and the
# error to raise ("invalid", "archive", "slow", "raise-policy" or anything).
class ImportCatalog
  include SolidJobs::Task
  task_options max_failures: 3

  retry_delay do |failure_count, error, envelope|
    case envelope.fetch("arguments")[2]
    when "invalid" then :drop if error.is_a?(InvalidCatalog)
    when "archive" then :archive
    when "custom" then 0.05 * failure_count
    when "raise-policy" then raise "policy bug"
    when "garbage" then "soon"
    end
  end

  after_final_failure do |envelope, error|
    path, label, = envelope.fetch("arguments")
    Ledger.append(path, "final #{label} #{error.class}")
    raise "hook bug" if label == "hook-raises"
  end

  def execute_task(path, label, mode)
    Ledger.append(path, "attempt #{label}")
    raise InvalidCatalog, "bad catalog" if mode == "invalid"

    raise "import failed (#{mode})"
  end
end

class WithinTask
  include SolidJobs::Task
  task_options max_failures: 100, retry_within: 0.2

  retry_delay { |_count, _error, _envelope| 0.3 }

  def execute_task(path)
    Ledger.append(path, "attempt")
    raise "still broken"
  end
end

class SubImport < ImportCatalog; end

class SlowFailingTask
  include SolidJobs::Task

  def execute_task(path, label, seconds)
    Ledger.append(path, "start #{label}")
    sleep(seconds)
    raise "failed after #{seconds}s"
  end
end

# The torture test's task: a little work, then the job's sequence number in
# this process's ledger file.
class TortureTask
  include SolidJobs::Task

  def self.for_channel(channel) = const_get(channel.capitalize)

  def execute_task(seq, dir, work_ms)
    sleep(work_ms / 1000.0) if work_ms.positive?
    File.open(File.join(dir, "ledger-#{Process.pid}"), "a") { |f| f.write("#{seq}\n") }
  end

  class Alpha < TortureTask
    task_options channel: "alpha"
  end

  class Beta < TortureTask
    task_options channel: "beta"
  end

  class Gamma < TortureTask
    task_options channel: "gamma"
  end

  # Unique jobs in the torture run, one mode per channel, keyed by the
  # sequence number (docs/unique.md).
  def self.unique_for_channel(channel) = const_get(:"Unique#{channel.capitalize}")

  class UniqueAlpha < TortureTask
    task_options channel: "alpha", unique: {by: ->(seq, *) { seq }, while: :running}
  end

  class UniqueBeta < TortureTask
    task_options channel: "beta", unique: {by: ->(seq, *) { seq }, while: :queued}
  end

  class UniqueGamma < TortureTask
    task_options channel: "gamma", unique: {by: ->(seq, *) { seq }, while: :until_done}
  end

  # Concurrency limited jobs in the torture run (docs/flow-control.md): 5
  # keys at limit 2, one group across the three channels, so a key's limit
  # spans channels. Each run also writes "S|E key seq realtime pid" to its
  # process's flow ledger, from which the run counts limit_exceeded.
  def self.limited_for_channel(channel) = const_get(:"Limited#{channel.capitalize}")

  module Limited
    KEYS = 5

    def execute_task(seq, dir, work_ms)
      path = File.join(dir, "flow-#{Process.pid}")
      key = seq % KEYS
      Ledger.append(path, "S #{key} #{seq} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
      super
      Ledger.append(path, "E #{key} #{seq} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
    end
  end

  LIMIT = {limit: 2, key: ->(seq, *) { seq % Limited::KEYS }, group: "TortureLimited"}.freeze

  class LimitedAlpha < TortureTask
    include Limited
    task_options channel: "alpha", concurrency: LIMIT
  end

  class LimitedBeta < TortureTask
    include Limited
    task_options channel: "beta", concurrency: LIMIT
  end

  class LimitedGamma < TortureTask
    include Limited
    task_options channel: "gamma", concurrency: LIMIT
  end

  # Rate limited jobs in the torture run (decision 42): 4 keys at 20 starts
  # per second, one group across the three channels. Each start writes
  # "R key seq realtime pid" to its process's rate ledger first, so a run
  # killed mid-job still counts as the start it was; the run counts, per
  # key, the starts in every window of 1 s.
  def self.rated_for_channel(channel) = const_get(:"Rated#{channel.capitalize}")

  module Rated
    KEYS = 4
    LIMIT = 20
    PER = 1

    def execute_task(seq, dir, work_ms)
      Ledger.append(File.join(dir, "rate-#{Process.pid}"),
                    "R #{seq % KEYS} #{seq} #{Process.clock_gettime(Process::CLOCK_REALTIME)} #{Process.pid}")
      super
    end
  end

  RATE = {limit: Rated::LIMIT, per: Rated::PER, key: ->(seq, *) { seq % Rated::KEYS }, group: "TortureRated"}.freeze

  class RatedAlpha < TortureTask
    include Rated
    task_options channel: "alpha", rate: RATE
  end

  class RatedBeta < TortureTask
    include Rated
    task_options channel: "beta", rate: RATE
  end

  class RatedGamma < TortureTask
    include Rated
    task_options channel: "gamma", rate: RATE
  end
end

# Raises an Exception that is not a StandardError.
class FatalTask
  include SolidJobs::Task
  task_options max_failures: 1

  def execute_task = raise(Exception, "not a StandardError") # rubocop:disable Lint/RaiseException -- what this task is for
end

# Sleeps past its lease on the first run only (the ledger says whether it
# started before), so a redelivered copy finishes quickly.
class OverrunOnceTask
  include SolidJobs::Task

  def execute_task(path, label, seconds)
    first = !(File.exist?(path) && File.readlines(path, chomp: true).include?("start #{label}"))
    Ledger.append(path, "start #{label}")
    sleep(seconds) if first
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

# Carries `padding` (bytes of Redis memory while it waits) and writes only
# its label: the backlog of the out-of-memory tests.
class BallastTask
  include SolidJobs::Task

  def execute_task(path, label, _padding)
    Ledger.append(path, label)
  end
end

# Writes its label and when it ran on the host's monotonic clock, which
# libfaketime leaves alone (FAKETIME_DONT_FAKE_MONOTONIC) and every process
# on the host shares: the clock tests compare it across processes.
class ClockTask
  include SolidJobs::Task

  def execute_task(path, label)
    Ledger.append(path, "#{label} #{Process.clock_gettime(Process::CLOCK_MONOTONIC)}")
  end
end

# Fails its first attempt and succeeds on the next, retried after 3 s; each
# attempt is written with the host's monotonic clock (see ClockTask).
class FailsOnceTask
  include SolidJobs::Task

  retry_delay { |_failures, _error, _envelope| 3 }

  def execute_task(path, label)
    first = !(File.exist?(path) && File.readlines(path).any? { |line| line.start_with?("attempt #{label} ") })
    Ledger.append(path, "attempt #{label} #{Process.clock_gettime(Process::CLOCK_MONOTONIC)}")
    raise "first attempt of #{label} fails" if first
  end
end

# Unique tasks (test/unique_test.rb): the key is the label, so jobs with
# the same label are duplicates. `behaviour`: "ok", "sleep:<seconds>",
# "fail" (always raises), "fail_once" (raises on its first attempt only).
module UniqueBehaviour
  def execute_task(path, label, behaviour = "ok")
    Ledger.append(path, "start #{label}")
    case behaviour
    when /\Asleep:(.+)\z/ then sleep(Float(::Regexp.last_match(1)))
    when /\Aawait:(.+)\z/
      # Runs until the test creates the file (at most 30 s, a hang guard).
      file = ::Regexp.last_match(1)
      Poll.wait(30) { File.exist?(file) }
    when "fail" then raise ArgumentError, "failing on purpose: #{label}"
    when "fail_once"
      raise ArgumentError, "failing once: #{label}" if File.readlines(path, chomp: true).count("start #{label}") == 1
    end
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class UniqueQueuedTask
  include SolidJobs::Task
  include UniqueBehaviour
  task_options unique: {by: ->(_path, label, *) { label }, while: :queued}
  retry_delay { 0.3 }
end

class UniqueRunningTask
  include SolidJobs::Task
  include UniqueBehaviour
  task_options max_failures: 2, unique: {by: ->(_path, label, *) { label }, while: :running}
  retry_delay { 0.3 }
end

class UniqueUntilDoneTask
  include SolidJobs::Task
  include UniqueBehaviour
  task_options max_failures: 1, unique: {by: ->(_path, label, *) { label }, while: :until_done}
end

class UniqueByArgumentsTask
  include SolidJobs::Task
  task_options unique: {by: :arguments, while: :until_done}

  def execute_task(*) = nil
end

class UniqueConstantTask
  include SolidJobs::Task
  task_options unique: {by: "only-one", while: :queued, for: 0.3}

  def execute_task(*) = nil
end

# `for:` shorter than the job: its lock expires while it runs.
class UniqueBoundedRunningTask
  include SolidJobs::Task
  include UniqueBehaviour
  task_options unique: {by: ->(_path, label, *) { label }, while: :running, for: 0.3}
end

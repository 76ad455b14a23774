# frozen_string_literal: true

require_relative "test_helper"

# The issue's proof for concurrency limits (docs/flow-control.md): real
# `solid-jobs` processes, 4 x 4 workers, jobs over 10 keys with `limit: 2`.
# Every run writes its start and end to its process's ledger; the test
# rebuilds each key's intervals and checks that no instant has more than 2
# of them open, while processes are SIGKILLed and restarted, or TERMed and
# replaced one by one (a rolling restart). A killed run has no end: its
# interval ends at the kill (its slot, held by its claim, comes back only
# when the claim is recovered, later still).
#
# The issue's full size by default: 2,000 jobs, which trickle in over about
# 10 s (the file takes about 20 s on a 2-core host); FLOW_PROOF_JOBS sets
# another number.
class FlowConcurrencyTest < SolidJobsTest
  KEYS = Array.new(10) { |i| "tenant-#{i}" }
  LIMIT = 2
  JOBS = Integer(ENV.fetch("FLOW_PROOF_JOBS", "2000"))
  PROCESSES = 4
  WORKERS = 4

  def setup
    super
    @kills = {} # pid => realtime of the SIGKILL
    @workers = []
    @seq = 0
  end

  def teardown
    @producer&.kill
    @workers.each(&:kill!)
    super
  end

  def worker
    @seq += 1
    log = File.join(@ledger_dir, "worker-#{@seq}.log")
    w = WorkerProcess.new(redis_url: REDIS.url, namespace: @namespace, log: log,
                          args: ["--concurrency", WORKERS.to_s]).start
    @workers << w
    w
  end

  # Jobs trickle in (about 100 batches, 0.1 s apart) so they keep flowing
  # while processes die or restart; `enqueued` counts what is written.
  # `hold_last`: the last batch waits until #release_last, so jobs are still
  # to come when a restart ends however long it took on a loaded host.
  def start_producer(hold_last: false)
    rng = Random.new(17)
    lists = Array.new(JOBS) { |i| [@ledger_dir, KEYS[i % KEYS.size], "job-#{i}", rng.rand(5..25)] }
    slices = lists.each_slice([JOBS / 100, 1].max).to_a
    @enqueued = 0
    @last_released = !hold_last
    @producer = Thread.new do
      slices.each_with_index do |slice, i|
        # The bound is a hang guard.
        Poll.wait(300, every: 0.05) { @last_released } if i == slices.size - 1
        FlowLimitedTask.enqueue_many(slice)
        @enqueued += slice.size
        sleep 0.1 # pacing: jobs keep arriving while processes die or restart
      end
    end
  end

  def release_last = @last_released = true

  # SIGKILLs a node while it holds claims, so slots die with it.
  def kill_holding(process)
    node = eventually("#{process.pid} registered") { process.node_id(redis) }
    eventually("#{process.pid} holds claims", timeout: 30) { redis.hlen(key("claims:#{node}")).positive? }
    kill(process)
    node
  end

  def kill(process)
    @kills[process.pid] = Process.clock_gettime(Process::CLOCK_REALTIME)
    process.kill!
  end

  # Every ledger line: [kind, key, id, time, pid].
  def events
    Dir.glob(File.join(@ledger_dir, "flow-*")).flat_map do |path|
      File.readlines(path, chomp: true).filter_map do |line|
        kind, key, id, time, pid = line.split
        [kind, key, id, Float(time), Integer(pid)] if pid && %w[S E].include?(kind)
      end
    end
  end

  def ended_ids = events.select { |e| e[0] == "E" }.map { |e| e[2] }.uniq

  # Per key, the intervals of every run: a start is closed by the first
  # end of the same job in the same process after it, else by its
  # process's kill.
  def intervals
    starts = Hash.new { |h, k| h[k] = [] }
    ends = Hash.new { |h, k| h[k] = [] }
    events.each { |kind, key, id, time, pid| (kind == "S" ? starts : ends)[[key, id, pid]] << time }
    starts.each_with_object(Hash.new { |h, k| h[k] = [] }) do |((key, id, pid), times), out|
      closing = ends[[key, id, pid]].sort
      times.sort.each do |t|
        finish = closing.find { |e| e >= t }
        closing.delete(finish) if finish
        finish ||= @kills.fetch(pid) { flunk("#{id} started in #{pid} and never ended, and #{pid} was not killed") }
        out[key] << [t, finish]
      end
    end
  end

  # The most intervals open at once (an end at the same instant as a start
  # closes first: the release happens before the next claim).
  def max_overlap(list)
    points = list.flat_map { |s, e| [[s, 1], [e, -1]] }.sort_by { |t, d| [t, d] }
    open = 0
    points.map { |_, d| open += d }.max || 0
  end

  def assert_limit_held_and_all_done
    eventually("every job ended", timeout: 90) { ended_ids.size == JOBS }
    eventually("every claim settled", timeout: 20) { claims_count.zero? }
    per_key = intervals
    assert_equal KEYS.sort, per_key.keys.sort
    per_key.each do |key, list|
      assert_operator max_overlap(list), :<=, LIMIT, "more than #{LIMIT} runs of #{key} overlapped"
    end
    # The limit was reached (the proof is not vacuous): some key ran 2 at once.
    assert(per_key.values.any? { |list| max_overlap(list) == LIMIT }, "no key ever ran #{LIMIT} at once")
    assert_empty redis.keys(key("slots:*")), "no slot left behind"
    assert_empty redis.keys(key("blocked:*")), "no blocked job left behind"
    assert_equal 0, redis.llen(key("channel:default"))
    assert_equal 0, redis.hlen(key("jobs")), "every job left the index"
  end

  def test_limit_holds_across_sigkills_and_every_job_completes
    start_producer
    procs = Array.new(PROCESSES) { worker }
    eventually("a fifth enqueued", timeout: 60) { @enqueued >= JOBS / 5 }
    # Two nodes die holding claims (and so slots) mid-run; two replace them.
    dead = [kill_holding(procs[0])]
    eventually("half enqueued", timeout: 60) { @enqueued >= JOBS / 2 }
    dead << kill_holding(procs[1])
    2.times { worker }
    @producer.join
    assert_limit_held_and_all_done
    dead.each { |node| refute redis.exists?(key("claims:#{node}")), "the dead node's claims were recovered" }
    assert_operator redis.get(key("metric:blocked")).to_i, :>, 0, "jobs waited in blocked lists"
  end

  def test_limit_holds_during_a_rolling_restart
    start_producer(hold_last: true)
    procs = Array.new(PROCESSES) { worker }
    eventually("jobs are flowing", timeout: 60) { ended_ids.size >= JOBS / 20 }
    # Each node in turn is replaced while jobs flow: the new one starts, the
    # old one is TERMed (it finishes or hands back its claims, releasing
    # their slots in the same scripts).
    procs.each do |old|
      fresh = worker
      eventually("the replacement registered", timeout: 30) { fresh.node_id(redis) }
      assert old.stop("TERM", timeout: 30), "node #{old.pid} stopped gracefully"
    end
    # The restart overlapped the flow of jobs by construction: the last
    # batch is enqueued only now, and the new nodes run it.
    assert_operator ended_ids.size, :<, JOBS, "jobs were still to come when the restart ended"
    release_last
    @producer.join
    assert_limit_held_and_all_done
  end
end

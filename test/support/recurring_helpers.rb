# frozen_string_literal: true

# What the recurring tests with real worker processes share: the test app
# (test/support/cli_app.rb) runs schedule "probe" every second into channel
# "recurring", which the nodes do not serve, so each tick's job stays in
# that list to be counted by its meta tick.
module RecurringHelpers
  # Every worker a test started is SIGKILLed at its end, whatever it did.
  def setup
    super
    @workers = []
  end

  def teardown
    @workers.each { |w| w.signal("KILL") && w.wait(timeout: 5) }
    super
  end

  def worker(name, url: REDIS.url, env: {}, args: [])
    log = File.join(@ledger_dir, "#{name}.log")
    env = {"SOLID_JOBS_TEST_RECURRING_EVERY" => "1", "SOLID_JOBS_TEST_RECURRING_LEDGER" => ledger_path}.merge(env)
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: log, env: env,
                          args: ["--concurrency", "1", *args]).start
    @workers << w
    w
  end

  # {tick_ms => jobs} of the jobs waiting in the recurring channel.
  def jobs_by_tick(client = redis)
    client.lrange(key("channel:recurring"), 0, -1).map { |raw| JSON.parse(raw).dig("meta", "tick_ms") }.tally
  end

  def redis_now_ms(client = redis)
    s, us = client.time
    (s * 1000) + (us / 1000)
  end

  def assert_once_per_tick(by_tick, context)
    dupes = by_tick.select { |_, n| n > 1 }
    assert_empty dupes, "ticks enqueued more than once (#{context})"
    assert by_tick.keys.all? { |t| (t % 1000).zero? }, "every tick is on the second (#{context})"
  end

  # Ticks missing between the first and the last enqueued.
  def gaps(by_tick)
    ticks = by_tick.keys.sort
    return [] if ticks.empty?

    (ticks.first..ticks.last).step(1000).to_a - ticks
  end
end

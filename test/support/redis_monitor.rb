# frozen_string_literal: true

# Redis MONITOR on its own connection, for tests that must see which
# scripts ran (or that one did not run before a later marker). Each line
# MONITOR prints goes to the block given to #initialize, which returns what
# to keep (nil keeps nothing); #start returns once MONITOR is watching: an
# ECHO of a random marker sent through `redis` has come back through it,
# so every command sent after #start is seen.
class RedisMonitor
  def initialize(url, &select)
    @select = select
    @marker = "redis-monitor-#{SecureRandom.hex(4)}"
    @kept = []
    @lock = Mutex.new
    @watching = false
    @client = Redis.new(url: url)
  end

  # Starts watching; returns self once `redis` (a test's connection) is
  # seen through MONITOR, at most `timeout` seconds later.
  def start(redis, timeout: 10)
    @thread = Thread.new do
      @client.monitor { |line| note(line) }
    rescue Redis::BaseConnectionError, IOError
      nil
    end
    watching = Poll.wait(timeout, every: 0.02) { redis.echo(@marker) && @lock.synchronize { @watching } }
    raise "MONITOR not watching after #{timeout}s" unless watching

    self
  end

  # What the block kept, in MONITOR's order (from `since`, a #mark).
  def kept(since = 0) = @lock.synchronize { @kept.drop(since) }

  # Where the lines kept so far end.
  def mark = @lock.synchronize { @kept.size }

  def close
    @client.close
    @thread&.join(5)
  end

  private

  def note(line)
    return @lock.synchronize { @watching = true } if line.include?(@marker)

    item = @select.call(line)
    @lock.synchronize { @kept << item } unless item.nil?
  end
end

# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fault_proxy"
require "socket"

# systemd `Type=notify` as systemd sees it: the test binds the Unix
# datagram socket systemd would (a path, or an abstract `@name`), starts a
# real worker (`bundle exec solid-jobs`) with NOTIFY_SOCKET and
# WATCHDOG_USEC set, and reads what arrives: READY=1 once the workers run,
# WATCHDOG=1 every half WATCHDOG_USEC from the heartbeat thread, STOPPING=1
# on TERM.
class SystemdNotifyTest < SolidJobsTest
  # WATCHDOG_USEC: 1 s, so a ping every 0.5 s.
  WATCHDOG_USEC = 1_000_000

  def setup
    super
    @sockets = []
    @workers = []
    @proxies = []
  end

  def teardown
    @workers.each do |w|
      w.signal("KILL")
      w.wait(timeout: 5)
    end
    @proxies.each(&:close)
    @sockets.each(&:close)
    super
  end

  def bind(address)
    socket = Socket.new(:UNIX, :DGRAM)
    socket.bind(Socket.pack_sockaddr_un(address))
    (@sockets << socket).last
  end

  def worker(env: {}, url: REDIS.url)
    w = WorkerProcess.new(redis_url: url, namespace: @namespace, log: File.join(@ledger_dir, "worker.log"), env: env).start
    (@workers << w).last
  end

  # Datagrams until the block is true of what arrived (or the bound).
  def read_until(socket, timeout: 30)
    messages = []
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield(messages)
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      flunk("timed out; received #{messages.inspect}") unless left.positive? && socket.wait_readable(left)
      messages << socket.recv(4096)
    end
    messages
  end

  def count(messages, state) = messages.count { |m| m.lines(chomp: true).include?(state) }

  def node_of(ready) = ready[/node ([0-9a-f-]{36})/, 1]

  # Waits until the node has heartbeaten `beats` more times: its deadline in
  # the node_deadlines zset moves at every beat.
  def wait_for_heartbeats(node, beats)
    seen = []
    eventually("#{beats} heartbeats of node #{node}") do
      score = redis.zscore(key("node_deadlines"), node)
      seen << score if score && score != seen.last
      seen.size > beats
    end
  end

  # Heartbeats the proxy holds unanswered (each on its own connection: the
  # node hangs up on one at its read timeout and reconnects).
  def held_heartbeats(proxy, node) = proxy.links.count { |l| l.holds_request?(/#{Regexp.escape(key("control:#{node}"))}/) }

  def assert_notify_sequence(socket, env)
    w = worker(env: env)
    messages = read_until(socket) { |m| m.any? { |x| x.start_with?("READY=1") } }
    ready = messages.last
    assert_match(/\AREADY=1\nSTATUS=running \d+ worker\(s\) on default, node [0-9a-f-]{36}\z/, ready)
    messages = read_until(socket) { |m| count(m, "WATCHDOG=1") >= 3 }
    assert(messages.all?("WATCHDOG=1"), "only watchdog pings while running: #{messages.inspect}")
    w.signal("TERM")
    messages = read_until(socket) { |m| m.any? { |x| x.start_with?("STOPPING=1") } }
    assert_match(/\ASTOPPING=1\nSTATUS=stopping: waiting up to [\d.]+s for running tasks\z/, messages.last)
    status = w.wait(timeout: 20)
    assert status&.success?, "exit after TERM: #{status.inspect}\n#{w.log_tail}"
  end

  def test_ready_watchdog_and_stopping_on_a_path_socket
    path = File.join(@ledger_dir, "notify.sock")
    socket = bind(path)
    assert_notify_sequence(socket, "NOTIFY_SOCKET" => path, "WATCHDOG_USEC" => WATCHDOG_USEC.to_s)
  end

  def test_ready_watchdog_and_stopping_on_an_abstract_socket
    name = "solid-jobs-test-#{@namespace}"
    socket = bind("\0#{name}")
    assert_notify_sequence(socket, "NOTIFY_SOCKET" => "@#{name}", "WATCHDOG_USEC" => WATCHDOG_USEC.to_s)
  end

  # The pings are spaced by about half WATCHDOG_USEC: often enough for
  # systemd, not a busy loop.
  def test_watchdog_pings_every_half_watchdog_usec
    path = File.join(@ledger_dir, "notify.sock")
    socket = bind(path)
    worker(env: {"NOTIFY_SOCKET" => path, "WATCHDOG_USEC" => WATCHDOG_USEC.to_s})
    read_until(socket) { |m| m.any? { |x| x.start_with?("READY=1") } }
    stamps = []
    read_until(socket) do |m|
      stamps << Process.clock_gettime(Process::CLOCK_MONOTONIC) if m.last == "WATCHDOG=1"
      stamps.size >= 5
    end
    gaps = stamps.each_cons(2).map { |a, b| b - a }
    assert gaps.all? { |g| g.between?(0.25, 0.75) }, "gaps around 0.5 s: #{gaps.map { |g| g.round(3) }}"
  end

  # WATCHDOG_PID names another process: the watchdog is not this node's to
  # ping, READY and STOPPING are still sent.
  def test_no_watchdog_pings_when_watchdog_pid_names_another_process
    path = File.join(@ledger_dir, "notify.sock")
    socket = bind(path)
    w = worker(env: {"NOTIFY_SOCKET" => path, "WATCHDOG_USEC" => WATCHDOG_USEC.to_s, "WATCHDOG_PID" => "1"})
    ready = read_until(socket) { |m| m.any? { |x| x.start_with?("READY=1") } }.last
    # The heartbeat thread pings after each round: three beats (1.5 s) give
    # it rounds enough that a watchdog due every 0.5 s would have pinged.
    wait_for_heartbeats(node_of(ready), 3)
    w.signal("TERM")
    messages = read_until(socket) { |m| m.any? { |x| x.start_with?("STOPPING=1") } }
    assert_equal 0, count(messages, "WATCHDOG=1"), messages.inspect
  end

  # Decision: the watchdog shows the node's heartbeat thread is looping,
  # not that Redis answers, so a Redis outage does not make systemd restart
  # every node (they reconnect by themselves).
  def test_watchdog_pings_continue_while_redis_does_not_answer
    proxy = (@proxies << FaultProxy.new(REDIS.port).start).last
    path = File.join(@ledger_dir, "notify.sock")
    socket = bind(path)
    worker(env: {"NOTIFY_SOCKET" => path, "WATCHDOG_USEC" => WATCHDOG_USEC.to_s, "SOLID_JOBS_TEST_READ_TIMEOUT" => "0.3"},
           url: proxy.url)
    node = node_of(read_until(socket) { |m| m.any? { |x| x.start_with?("READY=1") } }.last)
    proxy.blackhole = true
    # What was sent before the silence is drained.
    nil while socket.recv_nonblock(4096, exception: false).is_a?(String)
    # Several heartbeats meet the silent Redis (interval 0.5 s, read
    # timeout 0.3 s), and pings keep arriving meanwhile.
    messages = read_until(socket) { |m| count(m, "WATCHDOG=1") >= 2 && held_heartbeats(proxy, node) >= 2 }
    assert(messages.all?("WATCHDOG=1"), messages.inspect)
    assert_operator count(messages, "WATCHDOG=1"), :>=, 2, "pings while Redis was silent"
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    messages = read_until(socket, timeout: 20) { |m| count(m, "WATCHDOG=1") >= 3 }
    assert_equal 3, count(messages, "WATCHDOG=1")
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 3.0, "still every 0.5 s or so"
    assert_operator proxy.links.size, :>, 0
  ensure
    proxy&.blackhole = false
  end

  # No systemd socket where NOTIFY_SOCKET points: the node runs anyway.
  def test_a_missing_socket_does_not_fail_the_node
    w = worker(env: {"NOTIFY_SOCKET" => File.join(@ledger_dir, "nobody-listens.sock"), "WATCHDOG_USEC" => WATCHDOG_USEC.to_s})
    LedgerTask.enqueue(ledger_path, "notified-nowhere")
    eventually("the job ran") { ledger_lines.any? { |l| l.start_with?("notified-nowhere") } }
    assert w.running?
    w.signal("TERM")
    assert w.wait(timeout: 20)&.success?
    assert_match(/notifying systemd at .*nobody-listens.sock failed/, File.read(File.join(@ledger_dir, "worker.log")))
  end
end

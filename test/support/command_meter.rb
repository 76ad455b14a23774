# frozen_string_literal: true

require "digest"
require "redis"
require "socket"

# Counts the Redis commands and round trips of one operation, exactly: what
# test/command_counts_test.rb asserts and `rake benchmark:commands` prints.
# Counts, never times, so they do not depend on the host or how busy it is.
#
# The clients under test connect through a Proxy, which counts what they
# send and their round trips per connection. MONITOR (a Monitor on its own
# connection) tells which commands ran and which of them a Lua script ran:
# a script's commands follow its EVALSHA line, so they belong to the
# connection that sent it. What does not cross the proxy is left out: the
# meter's own probes and markers, and helpers that set a scene.
module CommandCounts
  # An operation could not be measured (as opposed to a count that changed).
  class Error < StandardError; end

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # Splits one direction of a connection into complete RESP2 values as the
  # bytes arrive, however they are cut into reads. Requests come out as
  # Arrays of Strings; only the number of replies matters. RESP3 is not
  # understood: redis-rs and redis-rb 4.8 speak RESP2 unless told otherwise.
  class RespStream
    def initialize
      @buffer = +"".b
    end

    # The complete values in `bytes` and whatever was buffered before them.
    def feed(bytes)
      @buffer << bytes
      values = []
      position = 0
      while position < @buffer.bytesize
        value, after = parse(position)
        break unless after

        values << value
        position = after
      end
      @buffer = @buffer.byteslice(position..) || +"".b
      values
    end

    # True while part of a value has arrived and the rest has not.
    def partial? = !@buffer.empty?

    private

    # [value, offset after it], or nil when the value is not complete yet.
    def parse(position)
      line_end = @buffer.index("\r\n", position) or return nil
      line = @buffer.byteslice(position + 1, line_end - position - 1)
      after = line_end + 2
      case @buffer.getbyte(position)
      when 43, 45, 58 then [line, after] # + - :
      when 36 then bulk(Integer(line), after) # $
      when 42 then array(Integer(line), after) # *
      else [@buffer.byteslice(position, line_end - position).split(" "), after] # an inline command
      end
    end

    def bulk(length, after)
      return [nil, after] if length.negative?
      return nil if @buffer.bytesize < after + length + 2

      [@buffer.byteslice(after, length), after + length + 2]
    end

    def array(count, after)
      return [nil, after] if count.negative?

      items = Array.new(count) do
        item, after = parse(after)
        return nil unless after

        item
      end
      [items, after]
    end
  end

  # A TCP proxy in front of redis-server that counts, per client
  # connection, the commands sent and the round trips. A round trip is a
  # burst of requests: bytes that arrive while every command sent before
  # has been answered, so a pipeline is one, and so is a command split over
  # several reads. Each link reads whatever the client has written before
  # it delivers a reply, so a pipeline written at once is never split by an
  # early reply. Replies that answer no command (pub/sub) count as pushes.
  # Redis sees the proxy's upstream socket, so MONITOR names a link by it.
  class Proxy
    READ_SIZE = 1 << 20

    # Counters of one link at one moment; `labels`: every command sent so
    # far, as [NAME, first argument].
    Tally = Struct.new(:commands, :round_trips, :pushes, :labels, keyword_init: true) do
      def since(earlier)
        return self unless earlier

        Tally.new(commands: commands - earlier.commands, round_trips: round_trips - earlier.round_trips,
                  pushes: pushes - earlier.pushes, labels: labels.drop(earlier.labels.size))
      end
    end

    # One client connection and its own connection to Redis.
    class Link
      attr_reader :upstream_port

      def initialize(client, upstream, on_traffic, before_forward)
        @client = client
        @upstream = upstream
        @before_forward = before_forward
        @upstream_port = upstream.local_address.ip_port
        @on_traffic = on_traffic
        @requests = RespStream.new
        @replies = RespStream.new
        @lock = Mutex.new
        @outstanding = 0
        @tally = Tally.new(commands: 0, round_trips: 0, pushes: 0, labels: [])
      end

      def start
        @thread = Thread.new { pump }
        self
      end

      def tally = @lock.synchronize { @tally.dup.tap { |t| t.labels = t.labels.dup } }

      # True when bytes wait in a socket the pump has not read yet: the link
      # is not idle even if nothing was forwarded for a while.
      # A link whose sockets the pump already closed (IOError, or EBADF when
      # the descriptor went between the check and the select) waits on
      # nothing.
      def unread?
        ready, = IO.select([@client, @upstream], nil, nil, 0)
        !ready.nil?
      rescue IOError, SystemCallError
        false
      end

      def close
        [@client, @upstream].each { |s| s.close unless s.closed? }
        @thread&.join(1)
      end

      private

      def pump
        loop do
          readable, = IO.select([@client, @upstream])
          if readable.include?(@client)
            from_client(@client.readpartial(READ_SIZE))
          else
            reply = @upstream.readpartial(READ_SIZE)
            # Bytes the client wrote before this reply reached it belong to
            # the burst in progress.
            from_client(@client.readpartial(READ_SIZE)) while @client.wait_readable(0)
            from_upstream(reply)
          end
        end
      rescue IOError, SystemCallError # EOFError too
        [@client, @upstream].each { |s| s.close unless s.closed? }
      end

      def from_client(bytes)
        commands = @lock.synchronize do
          @tally.round_trips += 1 if @outstanding.zero? && !@requests.partial?
          @requests.feed(bytes).each do |command|
            @outstanding += 1
            @tally.commands += 1
            @tally.labels << [command.first.to_s.upcase, command[1]]
          end
        end
        # Before the bytes that complete these commands reach Redis: a
        # command cut over several reads runs only once they all arrived.
        @before_forward&.call(commands) unless commands.empty?
        @upstream.write(bytes)
        @on_traffic.call
      end

      def from_upstream(bytes)
        @lock.synchronize { @replies.feed(bytes).each { @outstanding.positive? ? @outstanding -= 1 : @tally.pushes += 1 } }
        @client.write(bytes)
        @on_traffic.call
      end
    end

    # `before_forward`: called with the complete commands of a read before
    # its bytes are forwarded, in the link's thread; it may hold them.
    def initialize(upstream_port, before_forward: nil)
      @upstream_port = upstream_port
      @before_forward = before_forward
      @links = []
      @lock = Mutex.new
      @last_traffic = CommandCounts.now
      @server = TCPServer.new("127.0.0.1", 0)
      @acceptor = Thread.new { accept_all }
    end

    def url = "redis://127.0.0.1:#{@server.addr[1]}/0"

    # {upstream port => Tally} of every link opened so far.
    def tallies = links.to_h { |link| [link.upstream_port, link.tally] }

    # True when nothing crossed the proxy for `seconds` and nothing waits
    # unread in any of its sockets.
    def quiet?(seconds)
      @lock.synchronize { CommandCounts.now - @last_traffic >= seconds } && links.none?(&:unread?)
    end

    def stop
      @server.close
      @acceptor.join(1)
      links.each(&:close)
    end

    private

    def links = @lock.synchronize { @links.dup }

    def accept_all
      loop do
        client = @server.accept
        upstream = TCPSocket.new("127.0.0.1", @upstream_port)
        [client, upstream].each { |s| s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1) }
        link = Link.new(client, upstream, -> { @lock.synchronize { @last_traffic = CommandCounts.now } }, @before_forward)
        @lock.synchronize { @links << link }
        link.start
      end
    rescue IOError, SystemCallError
      nil # the server socket was closed by #stop
    end
  end

  # Every command a redis-server runs, in its execution order, through
  # MONITOR on a connection of its own read by a background thread. Commands
  # run inside a Lua script show with source "lua", right after the EVAL or
  # EVALSHA line of their script (checked on Redis 7.0).
  class Monitor
    Entry = Struct.new(:source, :name, :args) do
      def lua? = source == "lua"
    end

    LINE = /\A\+[\d.]+ \[\d+ (?<source>[^\]]+)\] (?<rest>.*)\z/
    QUOTED = /"((?:[^"\\]|\\.)*)"/

    def initialize(port)
      @entries = []
      @lock = Mutex.new
      @socket = TCPSocket.new("127.0.0.1", port)
      @socket.write("MONITOR\r\n")
      reply = @socket.gets("\r\n")
      raise Error, "MONITOR answered #{reply.inspect}" unless reply == "+OK\r\n"

      @reader = Thread.new { read_all }
    end

    def entries = @lock.synchronize { @entries.dup }

    # Waits until the block, given the entries so far, is true; false when
    # `timeout` passed first. MONITOR output lags the commands a little.
    def wait_for(timeout)
      deadline = CommandCounts.now + timeout
      until yield(entries)
        return false if CommandCounts.now > deadline

        sleep 0.01 # poll interval of the bounded wait above
      end
      true
    end

    def stop
      @socket.close
      @reader.join
    end

    private

    def read_all
      while (line = @socket.gets("\r\n"))
        match = LINE.match(line.chomp("\r\n")) or next
        words = match[:rest].scan(QUOTED).flatten
        @lock.synchronize { @entries << Entry.new(match[:source], words.first.downcase, words.drop(1)) } unless words.empty?
      end
    rescue IOError, SystemCallError
      nil # closed by #stop
    end
  end

  # The Lua scripts of solid_core as Redis knows them: by the SHA1 of their
  # source. scripts.rs builds each from its file under lua/, with
  # prelude.lua prepended (`with_prelude`) or not (`Script::new`); this reads
  # that choice from scripts.rs itself, so a script added or moved to the
  # prelude is named here without a change.
  module ScriptNames
    CORE = File.expand_path("../../crates/solid_core", __dir__)
    SCRIPTS = "src/redis/scripts.rs"
    KINDS = "allowing_oom_with_prelude|allowing_oom|with_prelude|Script::new"
    DECLARATION = %r{^\s*(\w+): (#{KINDS})\(include_str!\("(?:\.\./)+lua/(\w+)\.lua"\)\)}
    SHEBANG = /^const ALLOW_OOM: &str = "([^"]+)";/

    module_function

    # {script name => source} exactly as redis-rs sends them.
    def sources
      @sources ||= begin
        prelude = File.read(File.join(CORE, "lua/prelude.lua"))
        declarations = File.read(File.join(CORE, SCRIPTS))
        shebang = declarations[SHEBANG, 1]
        found = declarations.scan(DECLARATION).to_h do |name, kind, file|
          source = File.read(File.join(CORE, "lua/#{file}.lua"))
          source = "#{prelude}\n#{source}" if kind.end_with?("with_prelude")
          source = "#{shebang}\n#{source}" if kind.start_with?("allowing_oom")
          [name, source]
        end
        raise Error, "no script declarations found in #{CORE}/#{SCRIPTS} (has its layout changed?)" if found.empty?

        found.merge(composed(prelude, shebang)).freeze
      end
    end

    # Scripts scripts.rs composes from others: `ack_claim` (its fn
    # `ack_claim`) wraps ack.lua and claim.lua as functions.
    def composed(prelude, shebang)
      read = ->(file) { File.read(File.join(CORE, "lua/#{file}.lua")) }
      {"ack_claim" => "#{shebang}\n#{prelude}\nlocal function ack_part(KEYS, ARGV)\n#{read["ack"]}\nend\n" \
                      "local function claim_part(KEYS, ARGV)\n#{read["claim"]}\nend\n#{read["ack_claim"]}"}
    end

    # {sha1 => script name}
    def by_sha = @by_sha ||= sources.to_h { |name, source| [Digest::SHA1.hexdigest(source), name] }.freeze
  end

  # What one client connection did in a measured operation: the proxy's
  # counts (`tally`) and, from MONITOR, each command it ran with the
  # commands its script ran (`calls`: [[label, [lua command, ...]], ...]).
  LinkCount = Struct.new(:role, :tally, :calls, keyword_init: true) do # rubocop:disable Lint/StructNewOverride -- the proxy's Tally, as Link#tally; nothing enumerates a LinkCount
    def commands = tally.commands
    def round_trips = tally.round_trips
    def pushes = tally.pushes
    def lua = calls.sum { |_, inner| inner.size }

    def describe
      labels = calls.map { |label, inner| inner.empty? ? label : "#{label}[#{OperationCount.squeeze(inner).join(" ")}]" }
      parts = OperationCount.squeeze(labels)
      parts << "#{pushes} doorbell message(s) received" if pushes.positive?
      # The proxy counts what was sent, MONITOR what ran: Redis 7.0 runs
      # nothing for a command it rejects (redis-rs's CLIENT SETINFO at
      # connect), so a difference is shown rather than hidden.
      parts << "(#{commands} sent, #{calls.size} ran)" if commands != calls.size
      "#{role} (#{round_trips} rt): #{parts.join(", ")}"
    end
  end

  # The cost of one operation, summed over the connections that took part.
  OperationCount = Struct.new(:key, :title, :links, keyword_init: true) do
    def self.squeeze(names)
      names.chunk_while { |a, b| a == b }.map { |run| run.size > 1 ? "#{run.first}×#{run.size}" : run.first }
    end

    def commands = links.sum(&:commands)
    def lua = links.sum(&:lua)
    def round_trips = links.sum(&:round_trips)

    # The figures a test asserts.
    def figures = {commands: commands, lua: lua, round_trips: round_trips}

    # Calls of the script `name` over every connection.
    def script_calls(name) = links.sum { |link| link.calls.count { |label, _| label == name } }

    # One line per connection, in a stable order (connections of different
    # threads interleave differently from run to run).
    def breakdown = links.map(&:describe).sort.join("; ")

    def summary = "#{commands} command(s) sent, #{lua} in Lua, #{round_trips} round trip(s) -- #{breakdown}"
  end

  # Measures operations from a quiet moment to the next quiet moment after
  # each is done, around one redis-server: the proxy the measured clients
  # connect through, a MONITOR feed, and a control connection (direct, so
  # never counted) for markers, probes and scene setting. Every script of
  # solid_core is loaded up front, so no measured call pays for redis-rs's
  # first use (EVALSHA answered NOSCRIPT, SCRIPT LOAD, EVALSHA again).
  #
  # A window is cut by an ECHO marker on the control connection once the
  # proxy is quiet, so nothing of the operation falls on the wrong side.
  class Meter
    SCRIPT_CALLS = %w[eval evalsha eval_ro evalsha_ro fcall fcall_ro].freeze
    # Sent by clients as they connect; not what a connection is for.
    SETUP_COMMANDS = %w[CLIENT SELECT AUTH HELLO].freeze
    POLL = 0.02
    TIMEOUT = 30

    attr_reader :proxy, :control, :direct_url

    # Opens everything, yields the meter, and closes it all again.
    # `roles`: {first command or script a connection sent => a name for it}
    # (a node's fetcher sends `claim` first, its acker `ack`...); a Hash
    # default names every other connection. `scripts`: {sha1 => name} for
    # labelling EVALSHA calls. `quiet`: seconds without traffic that end an
    # operation.
    def self.open(redis_port, **options)
      meter = new(redis_port, **options)
      yield meter
    ensure
      meter&.close
    end

    def initialize(redis_port, roles: {}, scripts: ScriptNames.by_sha, quiet: 0.5)
      @direct_url = "redis://127.0.0.1:#{redis_port}/0"
      @fence_probe = Redis.new(url: @direct_url)
      @fence_lock = Mutex.new
      @proxy = Proxy.new(redis_port, before_forward: method(:hold_until_clock_passes_fence))
      @monitor = Monitor.new(redis_port)
      @control = Redis.new(url: @direct_url)
      ScriptNames.sources.each_value { |source| @control.script(:load, source) }
      @roles = roles
      @scripts = scripts
      @quiet = quiet
      @marks = 0
      @ignored = []
    end

    def close
      @proxy&.stop
      @monitor&.stop
      @control&.close
      @fence_probe&.close
    end

    # Leaves every connection open now out of later counts: a scene that
    # starts afresh (new namespace, new node) does not pay for what earlier
    # ones' connections still send as they wind down (a stopped node's
    # subscriber unsubscribes when its read times out, seconds later).
    def ignore_existing_connections
      @ignored = @proxy.tallies.keys
    end

    # Runs the block (the operation) inside a window. The block may return a
    # lambda that is true once the operation is done, for operations that
    # finish on other threads; the window then closes at the first quiet
    # moment after that.
    def measure(key, title = key.to_s)
      wait_until_quiet
      start = cut
      done = yield
      wait_until("#{title} to complete", &done) if done
      wait_until_quiet
      count(key, title, start, cut)
    end

    def wait_until_quiet
      wait_until("#{@quiet}s without Redis traffic through the proxy") { @proxy.quiet?(@quiet) }
    end

    def wait_until(what)
      deadline = CommandCounts.now + TIMEOUT
      until yield
        raise Error, "timed out after #{TIMEOUT}s waiting for #{what}" if CommandCounts.now > deadline

        sleep POLL
      end
    end

    private

    Cut = Struct.new(:tallies, :entry_index)

    # A claim takes its fencing tokens with one SET ... GET that raises the
    # fence counter to Redis' clock (ms x 1024), and writes it a second time
    # when the counter was already at or past that floor: a claim in the
    # same Redis millisecond as the claim before it (claim.lua,
    # take_tokens). Which of the two a node's second claim takes is a race
    # of its threads against Redis' clock, not a property of the code
    # measured: back_to_back varied 38/39 between runs. So a script call
    # that names the fence counter waits here, before it reaches Redis,
    # until Redis' clock is past the counter: every count is of the
    # one-write path. Commands on this probe's own connection cross no link
    # and count nowhere. The wait is about a millisecond at most.
    FENCE_SUFFIX = ":fence"

    def hold_until_clock_passes_fence(commands)
      fences = commands.flat_map do |command|
        next [] unless SCRIPT_CALLS.include?(command.first.to_s.downcase)

        command.select { |a| a.is_a?(String) && a.end_with?(FENCE_SUFFIX) }
      end
      return if fences.empty?

      deadline = CommandCounts.now + TIMEOUT
      @fence_lock.synchronize do
        fences.uniq.each do |fence|
          until redis_clock_ms * 1024 > @fence_probe.get(fence).to_i
            raise Error, "Redis' clock did not pass #{fence} within #{TIMEOUT}s" if CommandCounts.now > deadline

            sleep 0.0002 # poll interval: Redis' clock passes the counter within about a millisecond
          end
        end
      end
    end

    def redis_clock_ms
      seconds, micros = @fence_probe.time
      (seconds * 1000) + (micros / 1000)
    end

    def cut
      tallies = @proxy.tallies
      Cut.new(tallies, mark)
    end

    # Index of the marker's MONITOR line: every command that ran before the
    # marker was sent is before it.
    def mark
      token = "command-meter-#{@marks += 1}"
      @control.echo(token)
      index = nil
      found = @monitor.wait_for(TIMEOUT) { |entries| index = entries.rindex { |e| e.name == "echo" && e.args.first == token } }
      raise Error, "MONITOR did not show the marker #{token} within #{TIMEOUT}s" unless found

      index
    end

    def count(key, title, start, finish)
      calls = calls_by_port(@monitor.entries[(start.entry_index + 1)...finish.entry_index])
      links = finish.tallies.filter_map do |port, tally|
        next if @ignored.include?(port)

        window = tally.since(start.tallies[port])
        next if window.commands.zero? && window.pushes.zero? && !calls.key?(port)

        LinkCount.new(role: role(port, tally), tally: window, calls: calls.fetch(port, []))
      end
      OperationCount.new(key: key, title: title, links: links)
    end

    # {client port => [[label, [lua command, ...]], ...]} in execution order.
    def calls_by_port(entries)
      calls = Hash.new { |h, k| h[k] = [] }
      owner = nil
      entries.each do |entry|
        if entry.lua?
          calls[owner].last[1] << entry.name.upcase if owner
          next
        end
        port = entry.source[/:(\d+)\z/, 1]&.to_i
        owner = SCRIPT_CALLS.include?(entry.name) ? port : nil
        calls[port] << [label(entry.name.upcase, entry.args.first), []] if port
      end
      calls
    end

    def label(name, first_argument)
      return name unless name.start_with?("EVALSHA")

      @scripts.fetch(first_argument.to_s.downcase, "EVALSHA #{first_argument.to_s[0, 8]}")
    end

    def role(port, tally)
      first = tally.labels.find { |name, _| !SETUP_COMMANDS.include?(name) }
      first_label = first && label(*first)
      @roles[first_label] || "connection :#{port} (first sent #{first_label || "nothing"})"
    end
  end
end

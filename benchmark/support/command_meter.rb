# frozen_string_literal: true

require_relative "common"
require_relative "operation_count"
require_relative "redis_monitor"
require_relative "round_trip_proxy"
require_relative "script_names"

module Bench
  # Measures the Redis commands and round trips of one operation, from a
  # quiet moment to the next quiet moment after it is done.
  #
  # The clients under test connect through a RoundTripProxy, which counts
  # what they send and their round trips per connection. MONITOR (on its own
  # connection) tells which commands ran and which of them a Lua script
  # ran; a script's commands follow its EVALSHA line, so they belong to the
  # connection that sent it. Everything that does not go through the proxy
  # is left out: this meter's own probes and markers, and helpers that set
  # a scene (a job pushed on a direct connection, for instance).
  #
  # A window is cut by an ECHO marker sent on the control connection once
  # the proxy is quiet, so nothing of the operation can fall on the wrong
  # side of it.
  class CommandMeter
    SCRIPT_CALLS = %w[eval evalsha eval_ro evalsha_ro fcall fcall_ro].freeze
    # Sent by clients as they connect; not what a connection is for.
    SETUP_COMMANDS = %w[CLIENT SELECT AUTH HELLO].freeze
    POLL = 0.02

    # `roles`: {first command or script a connection ever sent => a name
    # for it} (a SolidJobs node's fetcher sends `claim` first, its acker
    # `ack`...); a Hash default names every other connection. `quiet`: seconds without traffic that end an operation.
    # `scripts`: {sha1 => name} for labelling EVALSHA calls.
    def initialize(proxy:, monitor:, control:, roles: {}, scripts: ScriptNames.by_sha, quiet: 0.5, timeout: 30)
      @proxy = proxy
      @monitor = monitor
      @control = control
      @roles = roles
      @scripts = scripts
      @quiet = quiet
      @timeout = timeout
      @marks = 0
      @ignored = []
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
      deadline = Bench.now + @timeout
      until yield
        raise Failure, "timed out after #{@timeout}s waiting for #{what}" if Bench.now > deadline

        sleep POLL
      end
    end

    private

    Cut = Struct.new(:tallies, :entry_index)

    def cut
      tallies = @proxy.tallies
      Cut.new(tallies, mark)
    end

    # Index of the marker's MONITOR line: every command that ran before the
    # marker was sent is before it.
    def mark
      token = "bench-command-meter-#{@marks += 1}"
      @control.echo(token)
      index = nil
      found = @monitor.wait_for(@timeout) do |entries|
        index = entries.rindex { |e| e.name == "echo" && e.args.first == token }
      end
      raise Failure, "MONITOR did not show the marker #{token} within #{@timeout}s" unless found

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

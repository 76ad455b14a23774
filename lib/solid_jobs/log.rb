# frozen_string_literal: true

module SolidJobs
  # Log lines, usable from any Ractor. Every line is formatted by the one
  # formatter in Rust (solid_core::log, through Native::Log), the same one the
  # native threads use: timestamp, level, pid, the node and the fields given
  # (`Log.info("failed", job_id: id, task: name, retry_in_s: 2.0)`), as
  # `text` or `json` (docs/operations.md, "Logs"), redacted and written
  # with one write(2).
  #
  # Level and format are process-wide (set by SolidJobs.configure, a
  # node's start or the CLI; SOLID_JOBS_LOG_LEVEL / SOLID_JOBS_LOG_FORMAT
  # are the defaults). With `config.logger`, lines from every Ractor and
  # native thread are queued in Rust and one thread of the main Ractor
  # hands them to the logger, which is never shared.
  module Log
    # `none` silences everything (the test suite uses it).
    LEVELS = {debug: 0, info: 1, warn: 2, error: 3, none: 4}.freeze
    FORMATS = %i[text json].freeze
    # Lines handed to the logger per wake-up of the draining thread.
    BATCH = 256
    # Seconds the draining thread waits between checks that it should stop;
    # a stop wakes it at once, so this only bounds a missed wake-up.
    IDLE_WAIT = 60.0

    module_function

    def level = LEVELS.key(Native::Log.threshold)

    def level=(name)
      Native::Log.threshold = name.to_s
    end

    def format = Native::Log.format.to_sym

    def format=(name)
      Native::Log.format = name.to_s
    end

    def enabled?(severity) = LEVELS.fetch(severity) >= Native::Log.threshold
    def debug? = enabled?(:debug)

    # The node every line names unless it names its own (nil: none).
    def node_id = Native::Log.node_id

    def node_id=(id)
      Native::Log.node_id = id
    end

    # `fields`: Symbol => String, Symbol, Integer, Float, true, false or nil.
    def log(severity, message, fields = nil)
      Native::Log.write(LEVELS.fetch(severity), message.to_s, fields)
    end

    def debug(message, **fields) = log(:debug, message, fields.empty? ? nil : fields)
    def info(message, **fields) = log(:info, message, fields.empty? ? nil : fields)
    def warn(message, **fields) = log(:warn, message, fields.empty? ? nil : fields)
    def error(message, **fields) = log(:error, message, fields.empty? ? nil : fields)

    # Applies a configuration's log settings to this process; takes its
    # logger out of it (the configuration is made shareable, a logger is not).
    def apply(config)
      self.level = config.log_level
      self.format = config.log_format
      given, logger = config.take_logger
      self.logger = logger if given
    end

    # The logger lines are routed to, or nil (stderr). Main Ractor only.
    def logger = @logger

    # Seconds the exit (and a logger replaced while it hangs) waits for the
    # logger to take what is queued: a stalled log shipper must not keep a
    # stopping process alive past its supervisor's patience. What is left
    # after that goes to stderr.
    FLUSH_SECONDS = 2.0

    # Routes every line to `logger.add(severity, line)` (nil: back to
    # stderr). Main Ractor only: the logger stays there. Each logger gets
    # its own draining thread, which only ever calls that logger: a thread
    # still blocked in a replaced logger never calls the next one.
    def logger=(logger)
      stop_draining
      @logger = logger
      Native::Log.routed = !logger.nil?
      return unless logger

      generation = @generation = (@generation || 0) + 1
      @draining = Thread.new { drain(logger, generation) }.tap { |t| t.name = "solid-jobs-log" }
      return if @flush_at_exit

      @flush_at_exit = true
      at_exit { flush }
    end

    # Hands every queued line to the logger now (at exit, and when the
    # logger is replaced), for at most FLUSH_SECONDS; then what is still
    # queued goes to stderr.
    def flush(logger = @logger)
      return unless logger

      flusher = Thread.new do
        while (lines = Native::Log.take(BATCH, 0)).any?
          deliver(logger, lines)
        end
      end
      return if flusher.join(FLUSH_SECONDS)

      # The logger hangs: the lines it has not taken are not lost.
      while (lines = Native::Log.take(BATCH, 0)).any?
        lines.each { |_, line| write_stderr(line) }
      end
    end

    # A forked child has no draining thread (threads do not survive fork):
    # its lines go to stderr until it sets a logger again
    # (`SolidJobs.config.logger = ...` in the child).
    def after_fork
      return unless @logger

      @logger = nil
      @draining = nil
      Native::Log.routed = false
    end

    def drain(logger, generation)
      while @generation == generation
        lines = Native::Log.take(BATCH, IDLE_WAIT)
        deliver(logger, lines) unless lines.empty?
      end
    end

    def stop_draining
      thread = @draining or return
      @generation += 1
      # Interrupts the native wait (its unblocking function), which then
      # returns no line: none taken from the queue is lost.
      thread.wakeup if thread.alive?
      # A thread that does not end in time is blocked in its logger: it
      # ends after that call (its generation is gone), and the queue is
      # left to the next logger, or to stderr.
      flush(@logger) if thread.join(1)
    rescue ThreadError
      nil
    ensure
      @draining = nil
    end

    def deliver(logger, lines)
      lines.each do |severity, line|
        logger.add(severity, line)
      rescue StandardError => e
        report_broken_logger(e, line)
      end
    end

    # A logger that raises must not lose the line nor stop the others: the
    # line goes to stderr, with why, once per error class.
    def report_broken_logger(error, line)
      @logger_errors ||= {}
      name = Reflection.class_name(error)
      unless @logger_errors[name]
        @logger_errors[name] = true
        write_stderr("solid-jobs: the configured logger raised #{name}; lines it refuses go to stderr")
      end
      write_stderr(line)
    end

    def write_stderr(line)
      $stderr.write("#{line}\n")
    rescue IOError, SystemCallError
      nil
    end
    private_class_method :drain, :stop_draining, :deliver, :report_broken_logger, :write_stderr

    # Process._fork is the hook every fork goes through (Ruby 3.1+).
    module ForkHook
      def _fork
        pid = super
        Log.after_fork if pid.zero?
        pid
      end
    end
    Process.singleton_class.prepend(ForkHook)
  end
end

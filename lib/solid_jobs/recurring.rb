# frozen_string_literal: true

module SolidJobs
  # Recurring schedules: their configuration (config.recurring and
  # `task_options recurring:`), checked at configure or class-definition
  # time, and what a node hands its scheduler at start. The scheduler itself
  # is Rust (solid_core's redis/scheduler.rs): a thread of the node's Redis
  # source, so it costs nothing in Ruby. docs/recurring.md.
  module Recurring
    KEYS = %i[task every cron time_zone arguments channel missed].freeze
    # What `task_options recurring:` takes: the task is the class itself,
    # the name defaults to the task's name.
    TASK_KEYS = (KEYS - %i[task] + %i[name]).freeze
    MISSED = %i[latest skip].freeze
    NAME = /\A[A-Za-z0-9_.-]{1,100}\z/
    TASK_NAME = /\A[A-Z][A-Za-z0-9_]*(::[A-Z][A-Za-z0-9_]*)*\z/

    module_function

    # One config.recurring entry, checked and copied (frozen):
    # {name:, task:, every: | cron:, time_zone:, arguments:, channel:, missed:}.
    # `where` names the entry in messages.
    def spec(name, options, where: "recurring[#{name.inspect}]", task: nil)
      name = name.to_s if name.is_a?(Symbol)
      unless name.is_a?(String) && name.match?(NAME)
        raise ConfigurationError, "invalid schedule name #{name.inspect} in #{where}: expected 1-100 characters " \
                                  "from A-Z a-z 0-9 _ - ."
      end
      raise ConfigurationError, "#{where}: expected a Hash like {task: \"Name\", every: 30}" unless options.is_a?(Hash)

      options = options.transform_keys { |k| k.is_a?(String) ? k.to_sym : k }
      allowed = task ? TASK_KEYS : KEYS
      unknown = options.keys - allowed
      unless unknown.empty?
        raise ConfigurationError, "schedule #{name.inspect}: unknown key(s) #{unknown.map(&:inspect).join(", ")} " \
                                  "in #{where}; known: #{allowed.map(&:inspect).join(", ")}"
      end

      out = {name: Configuration.own(name), task: task_name(name, task || options[:task])}
      ticks(name, options, out)
      out[:arguments] = arguments(name, options.fetch(:arguments, []))
      if options.key?(:channel) && !options[:channel].nil?
        channel = options[:channel].to_s
        unless channel.match?(Configuration::CHANNEL_NAME)
          raise ConfigurationError, "schedule #{name.inspect}: channel #{options[:channel].inspect} is not a valid channel name"
        end

        out[:channel] = Configuration.own(channel)
      end
      out[:missed] = missed(name, options.fetch(:missed, :latest))
      Ractor.make_shareable(out)
    end

    def task_name(name, task)
      task = Reflection.name(task) if Module === task
      return Configuration.own(task) if task.is_a?(String) && task.match?(TASK_NAME)

      raise ConfigurationError, "schedule #{name.inspect}: task must name a task class (a constant path String such as " \
                                "\"NightlyReport\"), got #{task.inspect}"
    end

    # every: / cron: / time_zone:, checked by the code the scheduler runs.
    def ticks(name, options, out)
      every = options[:every]
      if options.key?(:every)
        unless every.is_a?(Integer) || (every.is_a?(Float) && every.finite? && every == every.round)
          raise ConfigurationError, "schedule #{name.inspect}: every must be a whole number of seconds (got #{every.inspect})"
        end

        every = every.to_i
        raise ConfigurationError, "schedule #{name.inspect}: every must be at least 1 second (got #{every})" if every < 1
      end
      cron = options[:cron]
      zone = options[:time_zone]
      if options.key?(:cron) && !cron.is_a?(String)
        raise ConfigurationError, "schedule #{name.inspect}: cron must be a String such as \"*/5 * * * *\" (got #{cron.inspect})"
      end

      if options.key?(:time_zone) && !zone.is_a?(String)
        raise ConfigurationError, "schedule #{name.inspect}: time_zone must be a String such as \"Europe/Paris\" " \
                                  "(got #{zone.inspect})"
      end
      begin
        Native.schedule_ticks(every, cron, zone, 0, 1)
      rescue ArgumentError, RangeError => e
        raise ConfigurationError, "schedule #{name.inspect}: #{e.message}"
      end
      out[:every] = every if every
      out[:cron] = Configuration.own(cron) if cron
      out[:time_zone] = Configuration.own(zone) if zone
    end

    # The job's arguments, checked JSON-native now (as an enqueue would),
    # not at the first tick.
    def arguments(name, list)
      unless list.is_a?(Array)
        raise ConfigurationError,
              "schedule #{name.inspect}: arguments must be an Array (got #{list.inspect})"
      end

      built = Native::Client.build("Recurring", list, "default", 1, nil)["arguments"]
      size = JSON.generate(built).bytesize
      if size > Native::RECURRING_MAX_ARGUMENTS
        raise ConfigurationError, "schedule #{name.inspect}: arguments are #{size} bytes of JSON: at most " \
                                  "#{Native::RECURRING_MAX_ARGUMENTS} (every proposal sends them; keep large data in " \
                                  "the app's storage and pass its key)"
      end

      built
    rescue ArgumentError => e
      raise ConfigurationError, "schedule #{name.inspect}: #{e.message}"
    end

    def missed(name, value)
      choice = MISSED.find { |m| m.name == (value.is_a?(Symbol) ? value.name : value) }
      choice or raise ConfigurationError, "schedule #{name.inspect}: missed must be :latest (run the most recent missed tick " \
                                          "once) or :skip (got #{value.inspect})"
    end

    # `task_options recurring: {...}` of a task class: checked now; the name
    # and task are filled in from the class (a class without a name yet, in
    # a test, gets them at node start).
    def task_option(options)
      unless options.is_a?(Hash)
        raise ConfigurationError,
              "task option recurring must be a Hash like {every: 30} or {cron: \"*/5 * * * *\"}"
      end

      options = options.transform_keys { |k| k.is_a?(String) ? k.to_sym : k }
      name = options.fetch(:name, "task")
      spec(name, options.except(:name), where: "task option recurring", task: "Placeholder")
      Ractor.make_shareable(options.dup)
    end

    # Every schedule this process knows: config.recurring, then the task
    # classes' own `recurring:` options. Main Ractor (Task.classes). Only
    # the task classes loaded now count: a node collects them through
    # #planned, which loads the app's task classes first.
    def schedules(config = SolidJobs.config)
      all = config.recurring.values.dup
      Task.classes.each do |klass|
        options = own_task_options(klass)[:recurring] or next

        task = Reflection.name(klass) or next
        # Only the class its name resolves to now: one replaced by a code
        # reload (or a removed constant) stays in Task.classes.
        next unless task_class(task).equal?(klass)

        # A namespaced task's default name: "Billing.Invoice" (schedule
        # names take no ':').
        all << spec(options.fetch(:name, task.gsub("::", ".")), options.except(:name),
                    where: "#{task}'s task option recurring", task: task)
      end
      all.each { |spec| refuse_unique!(spec, task_class(spec[:task])) }
      dupes = all.map { |s| s[:name] }.tally.select { |_, n| n > 1 }.keys
      raise ConfigurationError, "schedule name(s) given more than once: #{dupes.join(", ")}" unless dupes.empty?

      all
    end

    # A class's own task options (not inherited: a subclass of a recurring
    # task is not a second schedule), read without calling its methods.
    def own_task_options(klass)
      ivar = :@solid_jobs_task_options
      defined = Kernel.instance_method(:instance_variable_defined?).bind_call(klass, ivar)
      (defined && Reflection.instance_variable_get(klass, ivar)) || {}
    end

    # What a node hands its scheduler, and what `solid-jobs recurring` and
    # the dashboard list: every schedule with the template of its ticks'
    # job, [[spec, {channel:, max_failures:}], ...]. The same on every node
    # whatever it happened to load before: the app's task classes are
    # loaded first (#load_tasks: a Rails app that loads lazily is
    # eager-loaded), and each schedule's task is resolved allowing
    # autoload. A task that cannot be resolved is allowed only with the
    # schedule's own channel: (a task only another app defines), its jobs
    # getting the configured default max_failures; without one the node
    # cannot know the task's channel and refuses to start, rather than
    # enqueue where nodes that can resolve it would not.
    def planned(config = SolidJobs.config)
      load_tasks
      schedules(config).map do |spec|
        klass = task_class(spec[:task], load: true, schedule: spec[:name])
        unless klass || spec[:channel]
          raise ConfigurationError, "schedule #{spec[:name].inspect}: task #{spec[:task]} #{unresolved(spec[:task])}, so " \
                                    "its channel is unknown: define the task in the app this node loads (--require), " \
                                    "or give the schedule a channel: (its jobs then get the default max_failures)"
        end
        refuse_unique!(spec, klass)
        planned = template(spec, config, klass: klass)
        limit = concurrency(spec, klass)
        planned = planned.merge(concurrency: limit) if limit
        rate = rate(spec, klass)
        [spec, rate ? planned.merge(rate: rate) : planned].freeze
      end
    end

    # recurring.lua takes no unique lock: refused rather than silently not
    # unique.
    def refuse_unique!(spec, klass)
      return unless klass&.solid_jobs_options&.dig(:unique)

      raise ConfigurationError, "schedule #{spec[:name].inspect}: #{spec[:task]} is unique, and recurring " \
                                "ticks are enqueued without a unique lock (docs/unique.md)"
    end

    # Why `name` resolved to no task class: nothing by that name, or a
    # constant that is not one.
    def unresolved(name)
      task_class(name, load: true, any: true) ? "is not a task class (it does not include SolidJobs::Task)" : "is not defined"
    end

    # Called before a node collects its schedules, once the app has booted:
    # loads the task classes an app loads lazily, so that a task's own
    # `recurring:` schedule exists on every node. The Railtie sets it for a
    # Rails app (eager-loading it when config.eager_load is off); elsewhere
    # the app's --require file loads its task files itself.
    class << self
      attr_accessor :task_loader
    end

    def load_tasks
      loader = Recurring.task_loader
      loader&.call
    end

    # The job a schedule's ticks enqueue: the task's own channel and
    # max_failures (the configured defaults when there is no class)
    # unless the schedule names a channel. At configure the class is
    # looked up among the loaded ones only (configure may run before the
    # app's code); a node passes the class #planned resolved.
    def template(spec, config = SolidJobs.config, klass: task_class(spec[:task]))
      options = klass ? klass.solid_jobs_options : config.default_task_options
      {channel: spec[:channel] || options.fetch(:channel), max_failures: options.fetch(:max_failures)}
    end

    # The task class named `name`, asked of Module's own methods, never
    # of the class or the app's modules (which may redefine them); nil
    # when there is none (or, unless `any`, when it is no task class).
    # Without `load`, only a class loaded already counts: an autoload not
    # run yet is left alone (configure may run before the app's code).
    # With `load`, const_get runs the autoload (Ruby's, or Zeitwerk's,
    # which registers its constants as autoloads); a file that fails to
    # define its constant is a ConfigurationError naming the schedule.
    def task_class(name, load: false, any: false, schedule: nil)
      klass = name.split("::").reduce(Object) do |scope, part|
        defined = Module === scope && Module.instance_method(:const_defined?).bind_call(scope, part, false)
        break nil unless defined && (load || Module.instance_method(:autoload?).bind_call(scope, part).nil?)

        const(scope, part, name, schedule)
      end
      any || (Class === klass && Task::ClassMethods === klass) ? klass : nil
    end

    def const(scope, part, name, schedule)
      Module.instance_method(:const_get).bind_call(scope, part, false)
    rescue NameError, LoadError => e
      return nil unless schedule

      raise ConfigurationError, "schedule #{schedule.inspect}: loading its task #{name} failed " \
                                "(#{Reflection.class_name(e)}: #{e.message})"
    end

    # The Hash the native source settings take for one planned schedule.
    def native_spec(spec, template)
      {name: spec[:name], every: spec[:every], cron: spec[:cron], time_zone: spec[:time_zone], task: spec[:task],
       arguments: JSON.generate(spec[:arguments]), channel: template[:channel], max_failures: template[:max_failures],
       missed: spec[:missed].to_s, concurrency: template[:concurrency], rate: template[:rate]}
    end

    # A limited task's [group, limit, key material as JSON] for its ticks
    # (docs/flow-control.md): the key computed once, at node start, from
    # the schedule's fixed arguments, as Publisher computes it at enqueue.
    # nil for an unlimited task, or one no class was resolved for.
    def concurrency(spec, klass)
      limit = klass && klass.solid_jobs_options[:concurrency] or return nil

      material = limit[:key]&.call(*spec[:arguments])
      [limit[:group] || spec[:task], limit[:limit], JSON.generate(material)]
    rescue ArgumentError => e
      raise ConfigurationError, "schedule #{spec[:name].inspect}: #{spec[:task]}'s concurrency key: cannot take its " \
                                "arguments (#{e.message})"
    end

    # A rate limited task's [group, limit, window_ms, slack_ms, key material as
    # JSON] for its ticks (decision 42), computed as `concurrency` is.
    def rate(spec, klass)
      limit = klass && klass.solid_jobs_options[:rate] or return nil

      material = limit[:key]&.call(*spec[:arguments])
      [limit[:group] || spec[:task], limit[:limit], limit[:window_ms], limit[:slack_ms], JSON.generate(material)]
    rescue ArgumentError => e
      raise ConfigurationError, "schedule #{spec[:name].inspect}: #{spec[:task]}'s rate key: cannot take its " \
                                "arguments (#{e.message})"
    end

    # Refuses, at configure or node start, schedules whose jobs would go to
    # a backend that cannot enqueue a tick exactly once (SolidEngine has no
    # such command): NotSupported, naming the schedule. At configure the
    # templates are those of loaded classes; a node passes its plan's.
    def check_supported!(specs, config = SolidJobs.config, templates: specs.map { |s| template(s, config) })
      backend_specs = config.backend_specs
      specs.zip(templates).each do |spec, template|
        channel = template[:channel]
        name = config.channel_backends.fetch(channel, config.backend)
        next unless backend_specs.dig(name, :adapter) == :solid_engine

        raise Backends::NotSupported, "schedule #{spec[:name].inspect} enqueues to channel #{channel.inspect}, routed to the " \
                                      "SolidEngine backend #{name.inspect}, which cannot enqueue a recurring tick exactly " \
                                      "once; route the channel to Redis"
      end
    end

    # {backend => [native spec, ...]} of the schedules a node runs.
    def by_backend(config, routing)
      plans = planned(config)
      check_supported!(plans.map(&:first), config, templates: plans.map(&:last))
      plans.group_by { |_, template| routing.backend_for(template[:channel]) }
           .transform_values { |list| list.map { |spec, template| native_spec(spec, template) } }
    end

    # One schedule as `solid-jobs recurring` and the dashboard list it.
    # `configured` false: state left in Redis by a schedule this
    # configuration no longer has (it expires by itself: `expires_ms`).
    Row = Struct.new(:name, :task, :every, :cron, :time_zone, :channel, :missed, :next_ms, :last_tick_ms,
                     :last_outcome, :last_job_id, :last_job_tick_ms, :enqueued_ms, :expires_ms, :configured,
                     keyword_init: true) do
      def schedule
        return nil unless configured
        return "every #{every}s" if every

        time_zone ? "cron #{cron} (#{time_zone})" : "cron #{cron}"
      end

      def to_h = super.merge(schedule: schedule)
    end

    # Every configured schedule with its next run (from Redis' clock) and
    # what Redis records of its last tick, then any schedule state Redis
    # holds for names no longer configured. Reads only (one TIME, one
    # HGETALL and PEXPIRETIME per schedule, a SCAN for the leftovers).
    def status(config: SolidJobs.config, client: SolidJobs.client)
      keys = Native::Keyspace.new(config.namespace)
      s, us = client.call(["TIME"])
      now_ms = (Integer(s) * 1000) + (Integer(us) / 1000)
      # The schedules a worker would run, resolved as it resolves them.
      rows = planned(config).map do |spec, template|
        row(spec, template, client, keys, now_ms)
      end
      known = rows.map(&:name)
      prefix = keys.recurring("")
      Scan.keys(client, keys.recurring_pattern).sort.each do |key|
        name = key.delete_prefix(prefix)
        next if known.include?(name)

        rows << Row.new(name: name, configured: false, **recorded(client, key))
      end
      rows
    end

    def row(spec, template, client, keys, now_ms)
      next_ms = Native.schedule_ticks(spec[:every], spec[:cron], spec[:time_zone], now_ms, 1).first
      Row.new(name: spec[:name], task: spec[:task], every: spec[:every], cron: spec[:cron], time_zone: spec[:time_zone],
              channel: template[:channel], missed: spec[:missed], next_ms: next_ms, configured: true,
              **recorded(client, keys.recurring(spec[:name])))
    end

    def recorded(client, key)
      fields = client.call(["HGETALL", key])
      state = fields.is_a?(Hash) ? fields : fields.each_slice(2).to_h
      expires = client.call(["PEXPIRETIME", key])
      int = ->(v) { v && Integer(v, exception: false) }
      {last_tick_ms: int.(state["tick_ms"]), last_outcome: state["outcome"], last_job_id: state["job_id"],
       last_job_tick_ms: int.(state["job_tick_ms"]), enqueued_ms: int.(state["enqueued_ms"]),
       expires_ms: expires.is_a?(Integer) && expires.positive? ? expires : nil}
    end
  end
end

# frozen_string_literal: true

require "optparse"

module SolidJobs
  # What every command that reads an application's configuration takes
  # (`solid-jobs health`, `web`, `archive`): the app to load, the
  # configuration file and its environment, and Redis' URL and namespace;
  # and the worker's order to apply them, so each command sees the
  # backends, namespace and routing its workers see: flags > the file >
  # the app's SolidJobs.configure > defaults.
  module AppOptions
    module_function

    # Adds the options to an OptionParser, filling `options`.
    def define(parser, options)
      parser.on("-r", "--require PATH", "File to require first (e.g. ./config/environment, for its SolidJobs.configure)") do |v|
        options[:require] = v
      end
      parser.on("-C", "--config PATH", "Configuration file for redis_url, namespace, backends " \
                                       "(default: config/solid_jobs.yml under the app, when present)") do |v|
        options[:config] = v
      end
      parser.on("-e", "--environment NAME", "The file's section to use; also sets RAILS_ENV and RACK_ENV") do |v|
        options[:environment] = v
      end
      parser.on("--redis-url URL", "Redis URL (default $SOLID_JOBS_REDIS_URL or #{Configuration::DEFAULTS[:redis_url]})") do |v|
        options[:redis_url] = v
      end
      parser.on("--namespace NS", "Key prefix (default #{Configuration::DEFAULTS[:namespace]})") { |v| options[:namespace] = v }
    end

    # Loads the app and applies the file and the flags, in that order. The
    # file is found first, so a missing -C fails before the app loads.
    # Returns the ConfigFile applied, or nil.
    def apply(options)
      CLI.select_environment(options[:environment])
      config_file = ConfigFile.find(path: options[:config], environment: options[:environment], app: options[:require])
      CLI.load_app(options[:require])
      config_file&.apply
      SolidJobs.configure do |c|
        c.redis_url = options[:redis_url] if options[:redis_url]
        c.namespace = options[:namespace] if options[:namespace]
      end
      config_file
    end
  end
end
